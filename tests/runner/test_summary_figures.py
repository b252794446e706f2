"""The sweep table's figures read against each other: a packed sweep's rate column is the sequences/s it is sorted
by, and every step time has the same number of decimals."""
from __future__ import annotations

import io

from rich.console import Console

from ipuexp.result import IPUMemory, MemoryFigures, ModelFigures, Result, ThroughputFigures
from ipuexp.runner import summary


def _result(packs: float, step: float, sequences=None) -> Result:
    model = ModelFigures(name="bert", parameters=1, flops_per_sample=1.0, fwd_flops_per_sample=0.5,
                         bwd_flops_per_sample=0.5, num_stages=1, ipus_per_replica=1, capture_seconds=0.1)
    memory = MemoryFigures(fits=True, ipus=[IPUMemory(ipu=0, capacity_bytes=1000, total_bytes=500,
                                                      always_live_bytes=0, not_always_live_bytes=0,
                                                      max_tile_bytes=0, max_tile=0, fits=True)])
    throughput = ThroughputFigures(samples_per_s=packs, step_time_s=step, bubble_fraction=0.1, utilisation=[0.9],
                                   sequences_per_s=sequences)
    return Result(recipe="r", model=model, fits=True, memory=memory, throughput=throughput)


def _text(outcomes) -> str:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(summary.render(outcomes))
    return out.getvalue()


def test_packed_sweep_shows_sequences_per_s():
    outcomes = [summary.Outcome(0, ["a=1"], summary.DONE, _result(700.0, 2.0, sequences=1400.0)),
                summary.Outcome(1, ["a=2"], summary.DONE, _result(780.0, 2.0, sequences=1300.0))]
    text = _text(outcomes)
    assert "sequences/s" in text and "samples/s" not in text
    assert "1,400.0" in text and "1,300.0" in text and "780.0" not in text


def test_step_times_share_their_decimals():
    outcomes = [summary.Outcome(i, [f"a={i}"], summary.DONE, _result(100.0, step))
                for i, step in enumerate((14.11, 20.0, 66.14, 9.477))]
    text = _text(outcomes)
    for shown in ("14.11", "20.00", "66.14", "9.48"):
        assert shown in text, text
