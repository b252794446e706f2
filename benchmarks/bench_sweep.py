"""Sweep speed: a 100-point analytic sweep of BERT-Large through the default launcher, with and without tracking.

Targets on a 2-core machine: the whole ``python -m ipuexp -m +recipe=bert_large ...`` command (start-up, Ray, every
job, MLflow tracking, the summary) in at most 20 s with tracking on, and MLflow tracking costing at most 50 ms of a
job's time. The 100 points: gradient accumulation (5 values) x device iterations (4) x IO tiles (5). Runs in a fresh
temporary folder: first a 1-point sweep (which creates that folder's ``mlflow.db``, as a project's first run does),
then the 100 points with tracking on, then the same 100 points with ``tracking.enabled=false``. The graph capture
cache is the user's (``--cold-cache`` uses an empty one, so the 1-point sweep pays for the capture).

Per job it reports, for each of the two sweeps:
  * the time in the task function (``ipuexp.app.run_job``: engine, result files, MLflow run), from the ``ray``
    launcher's summary line; the difference between the two sweeps is what tracking costs a job;
  * the marginal wall time, ``(T(100 points) - T(1 point)) / 99``.
Exit status 1 when a target is missed or a job did not finish.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

TARGET_S = 20.0
"""The 100-point sweep with tracking on, seconds."""
TARGET_TRACKING_MS = 50.0
"""What tracking may add to a job's task time, milliseconds."""
AXES = {
    "options.gradient_accumulation": "512,1024,2048,4096,8192",
    "options.device_iterations": "1,2,4,8",
    "options.io.num_io_tiles": "0,32,64,128,192",
}


@dataclass
class Sweep:
    """One timed command."""

    seconds: float
    stdout: str
    returncode: int
    results: int
    """result.json files the sweep wrote."""

    @property
    def task_s(self) -> Optional[float]:
        """Mean time per job in the task function, from the ray launcher's summary line."""
        m = re.search(r"per job (\d+) ms in the task", self.stdout)
        return int(m.group(1)) / 1000 if m else None

    @property
    def headline(self) -> str:
        m = re.search(r"(\d+) done, (\d+) failed, (\d+) out of memory", self.stdout)
        return m.group(0) if m else "no summary"


def sweep_args(points: int) -> List[str]:
    """Command-line overrides for the first ``points`` points of the grid (100 = the whole grid)."""
    values = {k: v.split(",") for k, v in AXES.items()}
    if points == 100:
        return [f"{k}={','.join(v)}" for k, v in values.items()]
    if points == 1:
        return [f"{k}={v[0]}" for k, v in values.items()]
    raise ValueError("points: 1 or 100")


def run_sweep(cli: List[str], args: List[str], cwd: Path, env: Dict[str, str], name: str) -> Sweep:
    sweep_dir = cwd / "multirun" / name
    start = time.perf_counter()
    proc = subprocess.run(cli + args + [f"hydra.sweep.dir={sweep_dir}"], cwd=cwd, env=env, capture_output=True,
                          text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        print(f"{name} sweep failed:", (proc.stderr or proc.stdout)[-2000:], file=sys.stderr)
    return Sweep(seconds, proc.stdout, proc.returncode, len(list(sweep_dir.glob("*/result.json"))))


def ms(seconds: Optional[float]) -> str:
    return "?" if seconds is None else f"{1000 * seconds:.0f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launcher", default="default",
                        help="default (what conf/config.yaml selects), ray or basic")
    parser.add_argument("--cli", default=f"{shlex.quote(sys.executable)} -m ipuexp",
                        help="command that runs ipuexp (default: this interpreter's -m ipuexp)")
    parser.add_argument("--cold-cache", action="store_true", help="an empty capture cache: the sweep captures once")
    parser.add_argument("--ray-cpus", type=int, default=os.cpu_count() or 1, help="Ray CPUs (jobs in flight)")
    args = parser.parse_args()

    cli = shlex.split(args.cli)
    common = ["-m", "+recipe=bert_large"]
    if args.launcher != "default":
        common.append(f"hydra/launcher={args.launcher}")
    if args.launcher in ("default", "ray"):
        common.append(f"runner.ray.num_cpus={args.ray_cpus}")
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
        if args.cold_cache:
            env["IPUEXP_CACHE_DIR"] = str(work / "cache")
        one = run_sweep(cli, common + sweep_args(1), work, env, "one")
        on = run_sweep(cli, common + sweep_args(100), work, env, "on")
        off = run_sweep(cli, common + sweep_args(100) + ["tracking.enabled=false"], work, env, "off")

    print(f"100-point sweep of bert_large ({args.launcher} launcher): tracking on {on.seconds:.1f} s "
          f"(target <= {TARGET_S:.0f} s; {on.headline}), tracking off {off.seconds:.1f} s ({off.headline})")
    print(f"1-point sweep (start-up, Ray, capture, imports): {one.seconds:.1f} s")
    print(f"per job in the task (engine, files, MLflow run): tracking on {ms(on.task_s)}, off {ms(off.task_s)}")
    cost = on.task_s - off.task_s if on.task_s is not None and off.task_s is not None else None
    print(f"tracking costs a job {ms(cost)} (target <= {TARGET_TRACKING_MS:.0f} ms)")
    print(f"marginal wall time per job: tracking on {ms((on.seconds - one.seconds) / 99)}, "
          f"off {ms((off.seconds - one.seconds) / 99)}")
    complete = all(s.returncode == 0 and s.results == 100 for s in (on, off))
    if not complete:
        print(f"a sweep did not complete: {on.results} and {off.results} result.json files of 100", file=sys.stderr)
    met = on.seconds <= TARGET_S and cost is not None and 1000 * cost <= TARGET_TRACKING_MS
    return 0 if complete and met else 1


if __name__ == "__main__":
    sys.exit(main())
