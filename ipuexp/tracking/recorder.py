"""A sweep's MLflow writes in a process of their own, beside its jobs.

Importing MLflow and opening its store take one to three seconds of CPU, longer than the analytic jobs of a small
sweep take together. When ``python -m ipuexp`` runs a tracked grid sweep in its own process (the ``ipuexp``
launcher below ``in_process_below`` points), that work goes to a forked process, the recorder, on the other core:
it does what the Hydra callback does as the sweep starts (the parent run, a resumed sweep, orphans), records each
job's run from what the job sends as it ends, and closes the sweep when the driver says so (or when the driver is
gone). The runs are the ones a job writes itself: the same parameters, metrics, tags, artifacts and statuses, with
the job's own start and end times.

A run's id is then known to the recorder only, so this applies to grid sweeps, whose jobs report no run id; with
``tracking.skip_completed`` (a job asks the store before it runs), an optimisation sweeper, other threads in the
driver (no safe fork) or another launcher, the jobs write their runs themselves, as before.

Points that finished in a lost sweep this one resumes are skipped once the recorder has read them from the store;
a point that ran before that is computed again, and the recorder records no second run for it.
"""
from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, List, Optional, Tuple

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

log = logging.getLogger("ipuexp")

_allowed = False
_pending: Optional["_Start"] = None
_active: Optional["Recorder"] = None


@dataclass
class _Start:
    """The callback's start, not yet done: ``start()`` opens the parent run and returns a :class:`Started`;
    ``end(orphans_to)`` closes the sweep."""

    sweep_dir: Optional[Path]
    """The sweep's folder; None for a single run."""
    start: Callable[[], "Started"]
    """The start in the recorder."""
    here: Callable[[], None]
    """The start in the driver, as without a recorder (with the driver's exit nets)."""
    end: Callable[[str], None]
    """``end``, ``KILLED`` (the driver exits early) or ``gone`` (the driver is gone without a word)."""


@dataclass
class Started:
    """What the sweep's start found: where its runs go, and the config hashes a resumed lost sweep finished."""

    uri: str
    experiment_id: str
    parent_id: Optional[str]
    """The sweep's parent run; None for a single run."""
    resumed: FrozenSet[str] = frozenset()


@dataclass
class JobRecord:
    """One job's run as the job saw it, sent to the recorder when the job ends (plain values: it is pickled)."""

    uri: str
    experiment: str
    data: Dict[str, Any]
    """The job's resolved configuration (``identity.resolved``): its tags and parameters are made from it."""
    overrides: List[str]
    sweep: Any
    """The job's ``SweepContext``; None for a single run."""
    name: Optional[str]
    start_ms: int
    end_ms: int = 0
    status: str = "FINISHED"
    metrics: List[Tuple[str, float, int, int]] = field(default_factory=list)
    tags: List[Tuple[str, str]] = field(default_factory=list)
    files: List[Tuple[str, Optional[str]]] = field(default_factory=list)
    texts: Dict[str, str] = field(default_factory=dict)
    """Files written into the run from text: ``error.txt``, a ``config.yaml`` the job did not write."""
    reply: bool = False
    """The job waits for its run's id (a single run prints it)."""


def allow() -> None:
    """Let this process hand a sweep's MLflow writes to a recorder (``python -m ipuexp`` says so)."""
    global _allowed
    _allowed = True


def defer(sweep_dir: Optional[Path], start: Callable[[], Started], here: Callable[[], None], end: Callable[[str], None]
          ) -> bool:
    """Keep the callback's start for the launcher to hand to a recorder (True), or say it must be done now."""
    global _pending
    if not _allowed or not hasattr(os, "fork"):
        return False
    _pending = _Start(sweep_dir, start, here, end)
    return True


def start_here() -> None:
    """Do a kept start in this process (a sweep on Ray: its workers look for the parent run)."""
    global _pending
    pending, _pending = _pending, None
    if pending is not None:
        pending.here()


def start_aside() -> None:
    """Hand a kept start to a forked recorder; where this process cannot fork safely (other threads), do it here."""
    global _pending, _active
    pending, _pending = _pending, None
    if pending is None or _active is not None:
        return
    from ipuexp.tracking.store import has_clients

    # A fork is safe in a process with one thread and no store connection of its own (SQLite's must not cross
    # a fork); ``python -m ipuexp`` reaches here without having opened the store.
    if threading.active_count() != 1 or has_clients():
        pending.here()
        return
    from multiprocessing.connection import Pipe

    parent_end, child_end = Pipe()
    _flush()  # what this process has buffered is written once, not again by the child
    pid = os.fork()
    if pid == 0:
        parent_end.close()
        code = 1
        try:
            code = _serve(child_end, pending)
        finally:
            _flush()
            os._exit(code)
    child_end.close()
    _active = Recorder(pid, parent_end, pending.sweep_dir)
    atexit.register(finish, "KILLED")  # an early exit (Ctrl-C) skips the callback's end


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def defer_run(cfg: Any) -> None:
    """For a single tracked run of ``python -m ipuexp`` (its configuration composed, Hydra not started): start its
    recorder now, so that MLflow is imported and its store opened while the job is composed and evaluated. Not for
    a run that asks the store first (``tracking.skip_completed``) or trains (its metrics are sent as it goes)."""
    mode = cfg.engine.mode
    if not cfg.tracking.enabled or cfg.tracking.skip_completed or str(getattr(mode, "value", mode)) != "analytic":
        return
    from ipuexp.tracking.store import client, experiment_id, experiment_name, tracking_uri

    uri, name = tracking_uri(cfg), experiment_name(cfg)

    def start() -> Started:
        return Started(uri=uri, experiment_id=experiment_id(client(uri), name, uri), parent_id=None)

    allow()
    if defer(None, start, lambda: None, lambda how: None):
        start_aside()


def for_sweep(sweep_dir: Optional[Path]) -> Optional["Recorder"]:
    """The recorder of the sweep in ``sweep_dir`` (None: of this single run), when this process has one."""
    if _active is not None and _active.sweep_dir == sweep_dir:
        return _active
    return None


def finish(orphans_to: str = "KILLED") -> bool:
    """Close the sweep in the recorder and wait for it; False when there was none. A kept start not handed to
    any recorder is done here first (a sweep whose points all failed to compose)."""
    global _active
    start_here()
    rec, _active = _active, None
    if rec is None:
        return False
    rec.close(orphans_to)
    return True


class Recorder:
    """The driver's end of the recorder."""

    def __init__(self, pid: int, conn: "Connection", sweep_dir: Optional[Path]):
        self.pid, self.conn, self.sweep_dir = pid, conn, sweep_dir
        self._resumed: Optional[FrozenSet[str]] = None

    def resumed(self) -> FrozenSet[str]:
        """The config hashes finished in a lost sweep this one resumes, once the recorder has read them (empty
        before)."""
        if self._resumed is None:
            try:
                if self.conn.poll():
                    self._resumed = frozenset(self.conn.recv()[1])
            except (EOFError, OSError):
                self._resumed = frozenset()
        return self._resumed or frozenset()

    def wait_run(self) -> Tuple[Optional[str], Optional[str]]:
        """The id of the run just sent (``JobRecord.reply``) and what the store said if it failed."""
        try:
            while True:
                message = self.conn.recv()
                if message[0] == "run":
                    return message[1], message[2]
        except (EOFError, OSError):
            return None, "the MLflow recorder stopped"

    def send(self, record: JobRecord) -> None:
        try:
            self.conn.send(("job", record))
        except (BrokenPipeError, OSError):
            log.warning(f"the MLflow recorder of the sweep has stopped: the run of {' '.join(record.overrides)} "
                        "is not recorded (its result is in the job's folder)")

    def close(self, orphans_to: str) -> None:
        try:
            self.conn.send(("end", orphans_to))
        except (BrokenPipeError, OSError):
            pass
        while True:
            try:
                _, status = os.waitpid(self.pid, 0)
                break
            except InterruptedError:
                continue
        self.conn.close()
        if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            log.warning("the MLflow recorder of the sweep ended with an error (see above); the jobs' results are "
                        "in their folders")


def _serve(conn: "Connection", pending: _Start) -> int:
    """The recorder: the sweep's start, each job's run, the sweep's end. The driver decides when it ends (an
    interrupt reaches both processes; the driver's jobs record theirs as KILLED and then close the sweep)."""
    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)
    from ipuexp.tracking.deferred import record_job

    ok = True
    try:
        started: Optional[Started] = pending.start()
    except Exception as exc:  # the store failed: the jobs' records cannot go anywhere; said once
        log.warning(f"ipuexp: MLflow recording of this sweep failed as it started: {exc}")
        started, ok = None, False
    try:
        conn.send(("resumed", sorted(started.resumed) if started is not None else []))
    except OSError:  # the driver is gone; what it sent before is still to be read
        pass
    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):  # the driver is gone without a word
            kind, payload = "end", "gone"
        if kind == "end":
            if started is not None:
                try:
                    pending.end(payload)
                except Exception as exc:
                    log.warning(f"ipuexp: closing the sweep's MLflow runs failed: {exc}")
                    ok = False
            return 0 if ok else 1
        run_id, failed = record_job(payload, started) if started is not None else (None, "the store failed to open")
        ok = ok and failed is None
        if payload.reply:
            try:
                conn.send(("run", run_id, failed))
            except OSError:
                pass
