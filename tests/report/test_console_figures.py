"""The run report's figures read against each other: the memory columns that add up share the totals' unit, and one
stage is "1 stage"."""
from __future__ import annotations

import io

from rich.console import Console

from ipuexp.report.console import print_result
from ipuexp.result import IPUMemory, IPUModelFigures, MemoryFigures, ModelFigures, Result, RunFigures

MiB = 1024 * 1024


def _printed(result: Result) -> str:
    out = io.StringIO()
    print_result(result, Console(file=out, width=120, color_system=None))
    return out.getvalue()


def _result(stages: int) -> Result:
    ipu = IPUModelFigures(ipu=0, stages=list(range(stages)), blocks=["a"], parameters=260, fwd_flops=1, bwd_flops=1,
                          saved_activation_bytes=1000, boundary_out_bytes=0)
    model = ModelFigures(name="toy", parameters=260, flops_per_sample=2.0, fwd_flops_per_sample=1.0,
                         bwd_flops_per_sample=1.0, num_stages=stages, ipus_per_replica=1, capture_seconds=0.0,
                         ipus=[ipu])
    mem = [IPUMemory(ipu=0, capacity_bytes=900 * MiB, total_bytes=int(13.7 * MiB), always_live_bytes=int(8.1 * MiB),
                     not_always_live_bytes=int(5.6 * MiB), max_tile_bytes=10_000, max_tile=0, fits=True),
           IPUMemory(ipu=1, capacity_bytes=900 * MiB, total_bytes=int(10.0 * MiB), always_live_bytes=int(9.3 * MiB),
                     not_always_live_bytes=int(0.7 * MiB), max_tile_bytes=8_000, max_tile=1472, fits=True)]
    run = RunFigures(micro_batch_size=40, replicas=1, ipus_per_replica=2, gradient_accumulation=10,
                     device_iterations=10, system="pod4", system_ipus=4)
    return Result(recipe="toy", model=model, fits=True, memory=MemoryFigures(fits=True, ipus=mem), run=run)


def test_memory_columns_share_the_totals_unit():
    text = _printed(_result(4))
    assert "0.7 MiB" in text and "5.6 MiB" in text and "716.8 KiB" not in text, text


def test_one_stage_is_singular():
    assert "1 stage" in _printed(_result(1))
    assert "1 stages" not in _printed(_result(1))
    assert "4 stages" in _printed(_result(4))


def test_the_first_line_says_what_ran():
    first = " ".join(_printed(_result(4)).split("\n")[:2])
    assert first.startswith("Ran: micro-batch 40, 1 replica of 2 IPUs") and "IPUs used 2 of 4 (pod4): 2 idle" in first
