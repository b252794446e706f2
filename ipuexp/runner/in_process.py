"""Run a batch of Hydra sweep jobs one after another in this process (the ``ipuexp`` launcher's small sweeps).

Each job is composed and run as Hydra's basic launcher runs it (same numbering, folders, ``.hydra`` outputs, Hydra
callbacks, so the same MLflow runs), and ends as a job on Ray ends: one progress line, a failure as one line with
the traceback in its log file, and the same table when the sweep ends (``ipuexp.runner.tally``). Graph captures are
shared by the process's own capture cache.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional, Protocol, Sequence, Tuple

from ipuexp.runner import compose, summary
from ipuexp.runner.errors import SweepReturn, failed_return
from ipuexp.runner.tally import Progress, Tally, report

if TYPE_CHECKING:
    from ipuexp.config.types import ConfigNode

log = logging.getLogger(__name__)


class Records(Protocol):
    """Where the jobs' MLflow runs are written aside (``ipuexp.tracking.recorder.Recorder``): how many were sent,
    and how many are written."""

    sent: int

    def take_answers(self, wait: bool) -> int: ...


def launch(*, hydra_context: Any, task_function: Any, config: ConfigNode, job_overrides: Sequence[Sequence[str]],
           initial_job_idx: int, why: str, show_summary: bool = True, tally: Optional[Tally] = None,
           records: Optional[Records] = None) -> List[Any]:
    """Run ``job_overrides`` here; return their JobReturns in order. ``why`` says why not on Ray (logged). With
    ``records``, a job's progress line waits until its MLflow run is written (the next jobs compute meanwhile): a
    sweep killed outright has a run in the store for every point it reported done."""
    from hydra.core.utils import JobStatus, configure_log, run_job, setup_globals

    from ipuexp.runner.worker import JobTiming, TaskTimer, failure

    setup_globals()
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    Path(str(config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    first = tally is None or tally.done == 0  # the reason once per sweep, not per batch
    log.info(summary.log_lines(f"Launching {len(job_overrides)} jobs in this process" + (f" ({why})" if first else "")))
    started = time.perf_counter()
    progress = Progress(job_overrides, tally)
    results: List[Any] = []
    compose_s: List[float] = []
    lines: List[Tuple[int, str]] = []  # progress lines, each after the runs sent before it are written

    def say(wait: bool) -> None:
        written = records.take_answers(wait) if records is not None else 0
        while lines and lines[0][0] <= written:
            log.info(lines.pop(0)[1])

    try:
        for pos, overrides in enumerate(job_overrides):
            idx = initial_job_idx + pos
            t = time.perf_counter()
            try:
                job_config = compose.job_config(hydra_context, config, overrides, idx)
            except Exception as exc:  # a bad override fails its own job, not the sweep
                ret = failed_return(list(overrides), compose.compose_error(exc))
            else:
                compose_s.append(time.perf_counter() - t)
                t = time.perf_counter()
                timer = TaskTimer(hydra_context)
                ret = SweepReturn.of(run_job(hydra_context=timer.hydra_context, task_function=task_function,
                                             config=job_config, job_dir_key="hydra.sweep.dir",
                                             job_subdir_key="hydra.sweep.subdir"))
                if ret.status == JobStatus.FAILED:  # while the job's log file is still open
                    ret.return_value = failure(ret._return_value, console=False)
                ret.timing = JobTiming(worker_s=time.perf_counter() - t, task_s=timer.seconds)
            configure_log(config.hydra.hydra_logging, config.hydra.verbose)
            results.append(ret)
            lines.append((records.sent if records is not None else 0, progress.line(idx, ret)))
            say(wait=False)
        say(wait=True)
    except KeyboardInterrupt:
        configure_log(config.hydra.hydra_logging, config.hydra.verbose)
        say(wait=True)
        log.warning(f"Interrupted: {len(job_overrides) - len(results)} jobs did not finish")
        report(results, initial_job_idx, tally, show_summary, f"Interrupted sweep {config.hydra.sweep.dir}",
               ends_sweep=True)
        raise
    wall_s = time.perf_counter() - started
    if tally is not None:
        tally.launched(1, compose_s)
    timing = summary.timing_line(wall_s, 1, compose_s, [getattr(r, "timing", None) for r in results])
    report(results, initial_job_idx, tally, show_summary, f"Sweep {config.hydra.sweep.dir}", timing)
    return results

