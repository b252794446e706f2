"""Run a batch of Hydra sweep jobs as Ray tasks (the launcher side of the ``ray`` launcher, and of ``ipuexp`` for
a sweep that ``ipuexp.runner.placement`` sends to Ray).

Each job is composed here, as Hydra's basic launcher composes it (same job numbering, sweep folder and ``.hydra``
outputs), and sent to the sweep's Ray driver, a process of its own (``ipuexp.runner.driver``), which runs it in a
Ray worker through Hydra's own ``run_job`` (``ipuexp.runner.worker``). A job that raises, or whose worker dies,
fails alone: the others run to the end and the table printed at the end says which failed and why. A Ray cluster
that goes away mid-sweep ends the sweep: the table of what finished, the sweep's tracking closed through the Hydra
callbacks, and one line saying what was lost and how to resume (``ipuexp.runner.loss``).
"""
from __future__ import annotations

import logging
import pickle
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, NoReturn, Optional, Sequence

from ipuexp.runner import captures, compose, driver, summary
from ipuexp.runner.cluster import RaySettings
from ipuexp.runner.errors import describe, failed_return
from ipuexp.runner.loss import ClusterLoss, ClusterLostError
from ipuexp.runner.tally import Progress, Tally, report

if TYPE_CHECKING:
    from ipuexp.config.types import ConfigNode

log = logging.getLogger(__name__)

DRIVER_LOG = "ray-driver.log"
"""File in the sweep folder that takes Ray's own console output (unless ``log_to_driver``)."""


@dataclass
class LaunchOptions:
    """How jobs are dispatched (``hydra.launcher`` fields)."""

    cpus_per_job: float = 1.0
    """Ray CPUs each job reserves; jobs in flight = cluster CPUs / this."""
    max_retries: int = 1
    """Times Ray re-runs a job whose worker process died (never a job that raised)."""
    preload: List[str] = field(default_factory=lambda: ["ipuexp.app"])
    """Modules each worker imports once, before its first job."""
    share_captures: bool = True
    """Capture each distinct model once for the whole sweep and hand the graph to every job that needs it."""
    summary: bool = True
    """Print the one-line-per-point table when the sweep ends (each batch's, under a sweeper that keeps no tally)."""
    runtime_env: Optional[Dict[str, Any]] = None
    """Ray runtime environment of the jobs' tasks (e.g. ``env_vars``, ``pip``); None: the workers' own."""


@dataclass
class _Job:
    pos: int
    idx: int
    overrides: List[str]
    config: Optional[ConfigNode] = None


def launch(*, hydra_context: Any, task_function: Any, config: ConfigNode, job_overrides: Sequence[Sequence[str]],
           initial_job_idx: int, settings: RaySettings, options: LaunchOptions,
           tally: Optional[Tally] = None) -> List[Any]:
    """Run ``job_overrides`` on Ray; return their JobReturns in order. With the sweep's ``tally`` (ipuexp's
    sweepers) the batch is added to it, summarised when the sweep ends; without, its table is printed now."""
    from hydra.core.singleton import Singleton
    from hydra.core.utils import configure_log, setup_globals
    from ray import cloudpickle

    setup_globals()
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    sweep_dir = Path(str(config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    try:
        drv = driver.connect(settings, None if settings.log_to_driver else str(sweep_dir.resolve() / DRIVER_LOG))
    except KeyboardInterrupt:
        driver.stop()
        raise
    log.info(f"Launching {len(job_overrides)} jobs on {drv.where}")

    started = time.perf_counter()
    batch = _Batch(drv, job_overrides, initial_job_idx, tally)
    compose_s: List[float] = []
    preload = list(options.preload) + _job_modules(config)
    context = cloudpickle.dumps(_context(hydra_context, task_function, Singleton.get_state(), preload))
    try:
        slots = drv.start_batch(str(uuid.uuid4()), context, options, preload)
        # Jobs are composed here one by one (as the basic launcher does) and sent at once, so the workers
        # start on the first jobs while the later ones are still being composed.
        for pos, overrides in enumerate(job_overrides):
            idx = initial_job_idx + pos
            job = _Job(pos, idx, list(overrides))
            t = time.perf_counter()
            try:
                job.config = compose.job_config(hydra_context, config, overrides, idx)
            except Exception as exc:  # a bad override fails its own job, not the sweep
                batch.record(pos, failed_return(job.overrides, compose.compose_error(exc)))
                continue
            finally:
                compose_s.append(time.perf_counter() - t)
            capture = captures.request(job.config) if options.share_captures else None
            batch.send(job, cloudpickle.dumps(job.config), capture)
            batch.collect(block=False)
        drv.send("end")
        while batch.pending:
            batch.collect(block=True)
    except KeyboardInterrupt:
        log.warning(f"Interrupted: cancelling {batch.pending} unfinished jobs and stopping Ray")
        driver.stop(cancel=True)
        report(batch.results, initial_job_idx, tally, options.summary, f"Interrupted sweep {config.hydra.sweep.dir}",
               ends_sweep=True)
        raise
    except driver.DriverLost as exc:
        driver.stop()
        _lost(str(exc), drv.label, batch, hydra_context, config, options)
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    wall_s = time.perf_counter() - started
    if tally is not None:
        tally.launched(slots, compose_s)
    timing = summary.timing_line(wall_s, slots, compose_s, [getattr(r, "timing", None) for r in batch.results])
    report(batch.results, initial_job_idx, tally, options.summary, f"Sweep {config.hydra.sweep.dir}", timing)
    return batch.results


class _Batch:
    """The launcher's account of one batch: jobs sent to the driver, JobReturns back from it."""

    def __init__(self, drv: driver.Driver, job_overrides: Sequence[Sequence[str]], initial_job_idx: int,
                 tally: Optional[Tally]):
        self.drv, self.total, self.initial_job_idx, self.tally = drv, len(job_overrides), initial_job_idx, tally
        self.results: List[Any] = [None] * self.total
        self.sent: Dict[int, _Job] = {}
        self.progress = Progress(job_overrides, tally)

    @property
    def pending(self) -> int:
        """Jobs sent and not back: running, queued, or waiting for their model's capture."""
        return len(self.sent)

    def send(self, job: _Job, config: bytes, capture: Any) -> None:
        self.drv.send("job", job.pos, job.overrides, config, capture)
        self.sent[job.pos] = job

    def record(self, pos: int, ret: Any) -> None:
        self.results[pos] = ret
        log.info(self.progress.line(self.initial_job_idx + pos, ret))

    def collect(self, block: bool) -> None:
        """Take the JobReturns that have come back; with ``block`` wait (in short steps, so Ctrl-C is seen)."""
        msg = self.drv.receive(1.0 if block else 0.0)
        while msg is not None:
            if msg[0] == "result":
                job = self.sent.pop(msg[1])
                self.record(job.pos, pickle.loads(msg[2]))
            msg = self.drv.receive(0.0)

    def outcomes(self) -> List[summary.Outcome]:
        return [summary.classify(self.initial_job_idx + pos, r) for pos, r in enumerate(self.results)
                if r is not None]


def _lost(reason: str, cluster: str, batch: _Batch, hydra_context: Any, config: ConfigNode,
          options: LaunchOptions) -> NoReturn:
    """The summary of what finished, the callbacks' close-out (tracking), then the one line, as an exception."""
    counts = summary.counts(batch.outcomes())
    loss = ClusterLoss(cluster=cluster, reason=reason, total=batch.total,
                       finished=counts[summary.DONE] + counts[summary.OOM] + counts[summary.SKIPPED],
                       failed=counts[summary.FAILED])
    report(batch.results, batch.initial_job_idx, batch.tally, options.summary,
           f"Sweep {config.hydra.sweep.dir}, cut short by the loss of its Ray cluster", ends_sweep=True)
    try:  # Hydra calls on_multirun_end only for a sweep that returns
        hydra_context.callbacks.on_multirun_end(config=config, cluster_lost=loss)
    except Exception as exc:
        log.warning(f"Closing the sweep after the loss of its Ray cluster failed: {describe(exc)}")
    raise ClusterLostError(loss.message)


def _job_modules(config: ConfigNode) -> List[str]:
    """Modules an ipuexp job will import besides ``preload``: MLflow when the sweep tracks its runs."""
    from omegaconf import OmegaConf

    try:
        tracking = OmegaConf.select(config, "tracking.enabled", default=False)
    except Exception:  # an interpolation the master config cannot resolve: leave it to the jobs
        tracking = False
    return ["mlflow"] if tracking is True else []


def _context(hydra_context: Any, task_function: Any, state: Any, preload: List[str]) -> Any:
    from ipuexp.runner.worker import SweepContext

    return SweepContext(hydra_context, task_function, state, list(preload))

