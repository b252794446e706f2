"""The end-of-sweep table: classification, order, best fitting point."""
from __future__ import annotations

from typing import Any, List, Optional

import pytest
from hydra.core.utils import JobReturn, JobStatus

from ipuexp.result import IPUMemory, MemoryFigures, ModelFigures, Result, Skipped, ThroughputFigures
from ipuexp.runner import summary
from ipuexp.runner.errors import JobFailedError


def _result(tput: Optional[float], fits: Optional[bool], used: int = 500) -> Result:
    model = ModelFigures(name="bert", parameters=1, flops_per_sample=1.0, fwd_flops_per_sample=0.5,
                         bwd_flops_per_sample=0.5, num_stages=1, ipus_per_replica=1, capture_seconds=0.1)
    memory = MemoryFigures(fits=bool(fits), ipus=[IPUMemory(ipu=0, capacity_bytes=1000, total_bytes=used,
                                                            always_live_bytes=0, not_always_live_bytes=0,
                                                            max_tile_bytes=0, max_tile=0, fits=bool(fits))])
    throughput = ThroughputFigures(samples_per_s=tput, step_time_s=2.0, bubble_fraction=0.1,
                                   utilisation=[0.9]) if tput is not None else None
    return Result(recipe="r", model=model, fits=fits, memory=memory, throughput=throughput)


def _ret(overrides: List[str], value: Any, ok: bool = True) -> JobReturn:
    ret = JobReturn(overrides=overrides, status=JobStatus.COMPLETED if ok else JobStatus.FAILED)
    ret.return_value = value
    return ret


@pytest.fixture
def outcomes() -> List[summary.Outcome]:
    rets = [
        _ret(["+recipe=r", "options.gradient_accumulation=1"], _result(100.0, True)),
        _ret(["+recipe=r", "options.gradient_accumulation=2"], _result(300.0, False, used=1500)),
        _ret(["+recipe=r", "options.gradient_accumulation=3"], JobFailedError("ValueError: bad", "ValueError",
                                                                               log_file="/x/3/job.log"), ok=False),
        _ret(["+recipe=r", "options.gradient_accumulation=4"], _result(200.0, True)),
    ]
    return [summary.classify(i, r) for i, r in enumerate(rets)]


def test_classify(outcomes: List[summary.Outcome]) -> None:
    assert [o.status for o in outcomes] == [summary.DONE, summary.OOM, summary.FAILED, summary.DONE]
    assert outcomes[2].error == "ValueError: bad" and outcomes[2].log_file == "/x/3/job.log"
    assert summary.counts(outcomes) == {summary.DONE: 2, summary.FAILED: 1, summary.OOM: 1, summary.SKIPPED: 0}


def test_order_and_best(outcomes: List[summary.Outcome]) -> None:
    # Highest throughput first (an out-of-memory point keeps its place by throughput), failures last.
    assert [o.idx for o in summary.ordered(outcomes)] == [1, 3, 0, 2]
    best = summary.best(outcomes)  # the fastest point that fits, not the fastest point
    assert best is not None and best.idx == 3


def test_varying_keys(outcomes: List[summary.Outcome]) -> None:
    assert summary.varying(outcomes) == ["options.gradient_accumulation"]


def test_print(outcomes: List[summary.Outcome], capsys: pytest.CaptureFixture) -> None:
    summary.print_summary(outcomes, title="Sweep s")
    out = capsys.readouterr().out
    assert "Sweep s: 2 done, 1 failed, 1 out of memory" in out
    assert "Best fitting point: #3 +recipe=r options.gradient_accumulation=4 (200.0 samples/s)" in out
    assert "#2 failed: ValueError: bad (traceback in /x/3/job.log)" in out
    lines = [ln for ln in out.splitlines() if "│" in ln]
    assert [ln.split("│")[1].strip() for ln in lines] == ["1", "3", "0", "2"]  # rows in throughput order
    assert "150%" in out and "out of memory" in out


def test_plain_return_values(capsys: pytest.CaptureFixture) -> None:
    """Any Hydra app's sweep gets a table too: its return values instead of throughput."""
    outs = [summary.classify(i, _ret([f"a={i}"], {"a": i})) for i in range(2)]
    summary.print_summary(outs)
    out = capsys.readouterr().out
    assert "2 done, 0 failed, 0 out of memory" in out and "{'a': 1}" in out and "samples/s" not in out


def test_skipped_points_say_so(outcomes: List[summary.Outcome], capsys: pytest.CaptureFixture) -> None:
    """A point whose configuration had run before (a resumed sweep) is neither done nor failed."""
    skipped = summary.classify(4, _ret(["+recipe=r", "options.gradient_accumulation=5"], Skipped()))
    assert skipped.status == summary.SKIPPED
    assert summary.line(skipped) == "skipped: already has a FINISHED run in MLflow"
    assert [o.idx for o in summary.ordered(outcomes + [skipped])] == [1, 3, 0, 4, 2]  # before the failures
    summary.print_summary(outcomes + [skipped], title="Sweep s")
    assert "Sweep s: 2 done, 1 failed, 1 out of memory, 1 skipped" in capsys.readouterr().out
