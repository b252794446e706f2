"""A sweep's points over all its batches, summarised once when the sweep ends, whatever launcher ran them.

ipuexp's sweepers (``hydra/sweeper: ipuexp`` and the Optuna sweeper ``python -m ipuexp`` selects) open a tally and
run each batch through :class:`Tallied`, which records the batch's JobReturns. ipuexp's launcher numbers its progress
lines over the whole sweep and adds where the time went; a launcher of its own used under another sweeper, which
opens no tally, prints a table after each batch instead (``ipuexp.runner.sweep``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence

from ipuexp.runner import summary
from ipuexp.runner.errors import SweepReturn

if TYPE_CHECKING:
    from ipuexp.config.types import ConfigNode


@dataclass
class Tally:
    """What a sweep has run so far."""

    total: int
    """Points the sweep will run (an optimisation sweeper: its trials)."""
    show: bool = True
    """Print the summary (``hydra.launcher.summary``)."""
    outcomes: List[summary.Outcome] = field(default_factory=list)
    returns: List[Any] = field(default_factory=list)
    wall_s: float = 0.0
    """Seconds spent in the launcher's batches (an optimisation sweeper's sampling between them left out)."""
    slots: Optional[int] = None
    """Jobs the launcher ran at once, when it says."""
    compose_s: List[float] = field(default_factory=list)
    """Seconds the launcher spent composing each job's configuration, when it says."""
    printed: bool = False
    batch_started: Optional[float] = None
    """``time.perf_counter()`` when the batch in flight started, if one is: a summary printed while it runs (an
    interrupt, a lost cluster) counts its time so far."""

    @property
    def done(self) -> int:
        return len(self.outcomes)

    def add(self, returns: Sequence[Any], initial_job_idx: int) -> None:
        """A batch's JobReturns in job order (None: a job that did not come back)."""
        for pos, ret in enumerate(returns):
            if ret is not None:
                self.returns.append(ret)
                self.outcomes.append(summary.classify(initial_job_idx + pos, ret))

    def launched(self, slots: int, compose_s: Sequence[float]) -> None:
        """What ipuexp's launcher says of a batch it ran."""
        self.slots = max(self.slots or 0, slots)
        self.compose_s += list(compose_s)

    def print(self, title: str, top: Optional[summary.Outcome] = None, source: str = "",
              notes: Sequence[str] = ()) -> None:
        """The summary (once), with ``top`` as the best point when the sweeper knows better than the table, and
        the sweeper's ``notes`` below it."""
        if self.printed or not self.show:
            return
        self.printed = True
        running = time.perf_counter() - self.batch_started if self.batch_started is not None else 0.0
        timing = summary.timing_line(self.wall_s + running, self.slots, self.compose_s,
                                     [getattr(r, "timing", None) for r in self.returns])
        summary.print_summary(self.outcomes, title=title, timing=timing, top=top, source=source, notes=notes)

    def refuse(self, idx: int, why: str) -> None:
        """Job ``idx`` finished, but the sweeper could not use what it returned (an optimisation sweeper's trial
        failed): the table lists it as failed, with ``why``."""
        for o in self.outcomes:
            if o.idx == idx and o.status == summary.DONE:
                o.status, o.error = summary.FAILED, why

    def first_failure(self) -> Optional[BaseException]:
        """The error of the first job that failed (not an out-of-memory point), for the sweep to end with."""
        for ret, o in zip(self.returns, self.outcomes):
            if o.status == summary.FAILED:
                return ret._return_value
        return None


class Progress:
    """The one line a launcher logs as each job of a batch ends, numbered over the whole sweep when a tally is
    open, and naming the point by the values that vary between points."""

    def __init__(self, job_overrides: Sequence[Sequence[str]], tally: Optional[Tally]):
        self.before = tally.done if tally is not None else 0
        self.total = tally.total if tally is not None else len(job_overrides)
        points = [o.overrides for o in (tally.outcomes if tally is not None else [])] + [list(j) for j in job_overrides]
        single = [ov.partition("=")[0] for ov in points[0]] if len(points) == 1 else []
        self.keys = summary.varying_keys(points) or single
        self.count = 0

    def line(self, idx: int, ret: Any) -> str:
        self.count += 1
        return summary.progress(self.before + self.count, self.total, summary.classify(idx, ret), self.keys)


class Tallied:
    """A sweeper's launcher with every batch recorded in ``tally``; failed JobReturns come back as
    :class:`SweepReturn`, which raise their error without Hydra's "Error executing job" line."""

    def __init__(self, launcher: Any, tally: Tally, total: Optional[Callable[[], int]] = None):
        self.launcher, self.tally, self.total = launcher, tally, total
        if hasattr(launcher, "tally"):  # ipuexp's launcher: progress over the sweep, timing, no table per batch
            launcher.tally = tally

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[Any]:
        if self.total is not None:  # a sweeper that settles its size only once it runs (Optuna's grid sampler)
            self.tally.total = self.total()
        start = self.tally.batch_started = time.perf_counter()
        try:
            returns = [SweepReturn.of(r) for r in self.launcher.launch(job_overrides, initial_job_idx)]
        finally:
            self.tally.wall_s += time.perf_counter() - start
            self.tally.batch_started = None
        if not getattr(self.launcher, "tally", None):
            self.tally.add(returns, initial_job_idx)
        return returns

    def __getattr__(self, name: str) -> Any:
        return getattr(self.launcher, name)


def report(results: Sequence[Any], initial_job_idx: int, tally: Optional[Tally], show: bool, title: str,
           timing: str = "", ends_sweep: bool = False) -> None:
    """How ipuexp's launcher reports a batch: into the sweep's tally (printed now only when the sweep ends here: an
    interrupt, a lost cluster), or, under a sweeper that opened none, as a table of its own (``show``)."""
    if tally is not None:
        tally.add(results, initial_job_idx)
        if ends_sweep:
            tally.print(title)
    elif show:
        outcomes = [summary.classify(initial_job_idx + pos, r) for pos, r in enumerate(results) if r is not None]
        summary.print_summary(outcomes, title=title, timing=timing)


def show_summary(config: ConfigNode) -> bool:
    """``hydra.launcher.summary`` (true when the launcher has no such setting)."""
    from omegaconf import OmegaConf

    return bool(OmegaConf.select(config, "hydra.launcher.summary", default=True))
