"""``benchmarks/bench_sweep.py`` reports the time to the first job from the job folders (the console's log lines
carry no time): a figure, or a word when no job ran, never ``nan s``."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_sweep", ROOT / "benchmarks" / "bench_sweep.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_sweep"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_time_to_first_job():
    bench = _bench()
    sweep = bench.Sweep(10.0, "[HYDRA] Launching 100 jobs in this process", 0, 100, started=1000.0, first_job=1003.5)
    assert bench.secs(sweep.to_first_job_s) == "3.5 s"
    none = bench.Sweep(1.0, "", 1, 0, started=1000.0)
    assert "nan" not in bench.secs(none.to_first_job_s)


def test_figures_read_across_folded_lines():
    bench = _bench()
    sweep = bench.Sweep(1.0, "Sweep x: 100 done, 0\n    failed, 0 out of memory\n100 jobs in 3 s, 2 at a\n    time; "
                             "per job 49\n    ms in the task", 0, 100)
    assert sweep.headline == "100 done, 0 failed, 0 out of memory"
    assert sweep.task_s == 0.049 and sweep.slots == "2"
