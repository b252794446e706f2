"""Runs logged through ipuexp's own tracking into a throwaway SQLite store, for the report to read back."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, List

import pytest

from ipuexp.config.compose import compose_config
from ipuexp.result import IPUMemory, MemoryFigures, ModelFigures, Result, ThroughputFigures


def result(throughput: float, ipu_bytes: List[int], fits: bool) -> Result:
    """A result shaped like the engine's, with the given throughput and memory per IPU."""
    capacity = 1472 * 638976
    memory = [IPUMemory(ipu=i, capacity_bytes=capacity, total_bytes=b, always_live_bytes=b // 2,
                        not_always_live_bytes=b - b // 2, max_tile_bytes=b // 1472, max_tile=0, fits=b <= capacity)
              for i, b in enumerate(ipu_bytes)]
    model = ModelFigures(name="bert_large", parameters=335_000_000, flops_per_sample=3.4e11,
                         fwd_flops_per_sample=1.1e11, bwd_flops_per_sample=2.3e11, num_stages=len(ipu_bytes),
                         ipus_per_replica=len(ipu_bytes), capture_seconds=0.1)
    return Result(recipe="bert_large", model=model, fits=fits, memory=MemoryFigures(fits=fits, ipus=memory),
                  throughput=ThroughputFigures(samples_per_s=throughput, step_time_s=1.0, bubble_fraction=0.1,
                                               utilisation=[0.8] * len(ipu_bytes)))


@pytest.fixture
def make_result() -> Callable[..., Result]:
    return result


@pytest.fixture
def log_sweep(db_uri: str, tmp_path: Path) -> Callable[..., None]:
    """Log one multirun (a parent run and a child per point) through ``track_job``.

    Each point is ``(ga, io_tiles, samples_per_s, [bytes per IPU], fits)``.
    """
    from ipuexp.tracking import JobTracking, SweepContext, track_job

    def log(name: str, points, experiment: str = "bert_large") -> None:
        sweep_dir = tmp_path / name
        sweep_dir.mkdir()
        keys = ["options.gradient_accumulation", "options.io.num_io_tiles"]
        for ga, tiles, tput, ipu_bytes, fits in points:
            overrides = [f"{keys[0]}={ga}", f"{keys[1]}={tiles}"]
            cfg = compose_config([f"tracking.uri={db_uri}", f"tracking.experiment={experiment}", *overrides])
            with track_job(JobTracking.of(cfg, sweep=SweepContext(dir=sweep_dir, job_overrides=overrides, swept_keys=keys))) as run:
                run.log_result(result(tput, ipu_bytes, fits))

    return log
