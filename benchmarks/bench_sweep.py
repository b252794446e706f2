"""Sweep speed: a 100-point analytic sweep of BERT-Large through the default launcher, with and without tracking.

Targets on a 2-core machine: the whole ``python -m ipuexp -m +recipe=bert_large ...`` command (start-up, every job,
MLflow tracking, the summary) in at most 20 s with tracking on, and MLflow tracking costing at most 50 ms of a
job's time. The 100 points: gradient accumulation (5 values) x device iterations (4) x IO tiles (5). Runs in a fresh
temporary folder: first a 1-point sweep (which creates that folder's ``mlflow.db``, as a project's first run does),
then the 100 points with tracking on, then the same 100 points with ``tracking.enabled=false``. The graph capture
cache is the user's (``--cold-cache`` uses an empty one, so the 1-point sweep pays for the capture).

The default launcher runs 100 points on Ray, a sweep of fewer in its own process (``ipuexp.runner.placement``). It
reports, for each of the two sweeps, the whole command, the time until the first job starts, and per job the time in
the task function (``ipuexp.app.run_job``: engine, result files, MLflow run) from the launcher's summary line. On
Ray two jobs share two cores with the driver, so the difference between the sweeps is a
noisy figure for what tracking costs; the same jobs are therefore also run one by one in this process, alternately
with and without tracking (``--jobs``), which gives the cost of tracking a job on its own. Exit status 1 when a
target is missed or a job did not finish.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Dict, List, Optional, Tuple

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
    started: float = 0.0
    """Wall-clock time the command started (``time.time()``)."""
    first_job: Optional[float] = None
    """Wall-clock time the first job began writing its folder (its ``.hydra`` files), if any did."""

    @property
    def text(self) -> str:
        """The output with its lines joined: the console folds a long line between words."""
        return " ".join(self.stdout.split())

    @property
    def task_s(self) -> Optional[float]:
        """Mean time per job in the task function, from the launcher's summary line."""
        m = re.search(r"per job (\d+) ms in the task", self.text)
        return int(m.group(1)) / 1000 if m else None

    @property
    def slots(self) -> str:
        """Jobs run at once, from the launcher's summary line (1 in this process)."""
        m = re.search(r"(\d+) at a time", self.text)
        return m.group(1) if m else "?"

    @property
    def to_first_job_s(self) -> Optional[float]:
        """From the command's start to the first job's folder (start-up, the pre-flight, Ray when it runs there):
        the console's log lines carry no time, the job folders' files do."""
        return None if self.first_job is None else self.first_job - self.started

    @property
    def headline(self) -> str:
        m = re.search(r"(\d+) done, (\d+) failed, (\d+) out of memory", self.text)
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
    started, start = time.time(), time.perf_counter()
    proc = subprocess.run(cli + args + [f"hydra.sweep.dir={sweep_dir}"], cwd=cwd, env=env, capture_output=True,
                          text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        print(f"{name} sweep failed:", (proc.stderr or proc.stdout)[-2000:], file=sys.stderr)
    firsts = [p.stat().st_mtime for p in sweep_dir.glob("*/.hydra/config.yaml")]
    return Sweep(seconds, proc.stdout + proc.stderr, proc.returncode, len(list(sweep_dir.glob("*/result.json"))),
                 started, min(firsts) if firsts else None)


def in_process(work: Path, jobs: int) -> Tuple[Dict[bool, float], Dict[bool, float], float]:
    """Mean wall and CPU seconds per job of ``ipuexp.app.run_job``, keyed by whether tracking is on, over ``jobs``
    points each, run alternately so that other load on the machine weighs on both alike (CPU time is the steadier
    figure on a busy machine; wall time adds the store's disk writes). Also the seconds the Hydra callback takes to
    open the sweep's parent run in a fresh process (importing MLflow, opening the store, finding the experiment:
    what a driver, and each worker's first job, pay once). Tracked jobs are children of that parent, as in a
    multirun."""
    from omegaconf import open_dict

    from ipuexp.app import run_job
    from ipuexp.config.compose import compose_config
    from ipuexp.tracking import SweepContext
    from ipuexp.tracking.hydra_callback import SweepTracking

    uri = f"sqlite:///{work / 'mlflow.db'}"  # the store the sweeps above made: it exists, as it usually does
    common = ["+recipe=bert_large", "report.charts=never", f"tracking.uri={uri}"]
    grid = [[f"{k}={v}" for k, v in zip(AXES, point)]
            for point in product(*(v.split(",") for v in AXES.values()))][:jobs]
    configs = {mode: [compose_config([*common, f"tracking.enabled={mode}", *point]) for point in grid]
               for mode in (False, True)}
    driver = compose_config(common, return_hydra_config=True)
    with open_dict(driver):
        driver.hydra.sweep.dir = str(work / "inproc" / "sweep")
        driver.hydra.overrides.task = sweep_args(100)
    callback = SweepTracking()
    start = time.perf_counter()
    callback.on_multirun_start(driver)
    once = time.perf_counter() - start
    job: List[SweepContext] = []
    SweepContext.from_hydra = classmethod(lambda cls: job[-1])  # type: ignore[method-assign]
    wall: Dict[bool, List[float]] = {False: [], True: []}
    cpu: Dict[bool, List[float]] = {False: [], True: []}
    for i, point in enumerate(grid):
        job.append(SweepContext(dir=Path(driver.hydra.sweep.dir), job_overrides=point, swept_keys=list(AXES),
                                sweep_overrides=sweep_args(100)))
        for mode in ((False, True) if i % 2 else (True, False)):
            out = work / "inproc" / f"{int(mode)}-{i}"
            out.mkdir(parents=True)
            start, start_cpu = time.perf_counter(), time.process_time()
            with contextlib.redirect_stdout(io.StringIO()):  # the per-job console table
                run_job(configs[mode][i], out)
            wall[mode].append(time.perf_counter() - start)
            cpu[mode].append(time.process_time() - start_cpu)
    callback.on_multirun_end(driver)
    return ({m: statistics.mean(v) for m, v in wall.items()}, {m: statistics.mean(v) for m, v in cpu.items()},
            once)


def secs(seconds: Optional[float]) -> str:
    return "? (no job folder)" if seconds is None else f"{seconds:.1f} s"


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
    parser.add_argument("--jobs", type=int, default=40, help="points run in this process with and without tracking")
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
        wall, cpu, once = in_process(work, args.jobs)

    print(f"100-point sweep of bert_large ({args.launcher} launcher): tracking on {on.seconds:.1f} s "
          f"(target <= {TARGET_S:.0f} s; {on.headline}), tracking off {off.seconds:.1f} s ({off.headline})")
    print(f"  until the first job starts (start-up; on Ray, its start): tracking on {secs(on.to_first_job_s)}, "
          f"off {secs(off.to_first_job_s)}; 1-point sweep {one.seconds:.1f} s")
    print(f"  per job in the task (engine, files, MLflow run), {on.slots} at a time: tracking on {ms(on.task_s)}, "
          f"off {ms(off.task_s)}")
    cost = wall[True] - wall[False]
    print(f"per job in one process ({args.jobs} points each, alternately): tracking off {ms(wall[False])}, "
          f"on {ms(wall[True])}: tracking costs {ms(cost)} a job (target <= {TARGET_TRACKING_MS:.0f} ms); "
          f"CPU time off {ms(cpu[False])}, on {ms(cpu[True])} (+{ms(cpu[True] - cpu[False])}); "
          f"{ms(once)} once per process (importing MLflow, opening the store and the sweep's parent run)")
    complete = all(s.returncode == 0 and s.results == 100 for s in (on, off))
    if not complete:
        print(f"a sweep did not complete: {on.results} and {off.results} result.json files of 100", file=sys.stderr)
    met = on.seconds <= TARGET_S and 1000 * cost <= TARGET_TRACKING_MS
    return 0 if complete and met else 1


if __name__ == "__main__":
    sys.exit(main())
