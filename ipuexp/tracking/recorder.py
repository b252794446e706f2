"""The MLflow writes of ``python -m ipuexp`` in a process of their own, beside its jobs.

Importing MLflow and opening its store take one to three seconds of CPU, longer than a prediction or the analytic
jobs of a small sweep. ``python -m ipuexp`` forks a recorder as it starts (``start_early``), which imports MLflow on
the other core while the command line is checked. Once the run, or a grid sweep in this process (the ``ipuexp``
launcher below ``in_process_below`` points), is known to be tracked, the recorder opens the store (``open_early``);
it then does what the Hydra callback does as a sweep starts (the parent run, a resumed sweep, orphans), writes each
job's run from what the job sends as it ends, and closes the sweep when the driver says so (or when the driver is
gone). The runs are the ones a job writes itself: the same parameters, metrics, tags, artifacts and statuses, with
the job's own start and end times.

A sweep's jobs report no run id; a single run waits for its run's id, which it prints. With
``tracking.skip_completed`` (a job asks the store before it runs), an optimisation sweeper, a sweep on Ray, a
functional run, other threads in the driver (no safe fork) or another launcher, the jobs write their runs
themselves, as before, and a recorder forked for nothing is ended at once.

Points that finished in a lost sweep this one resumes are skipped once the recorder has read them from the store;
a point that ran before that is computed again, and the recorder records no second run for it.
"""
from __future__ import annotations

import atexit
import logging
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, FrozenSet, Optional, Tuple

from ipuexp.runner.forking import can_fork, flush_streams
from ipuexp.tracking.record import JobRecord

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

log = logging.getLogger("ipuexp")

_allowed = False
_pending: Optional["_Start"] = None
_active: Optional["Recorder"] = None
_early: Optional["Recorder"] = None
"""A recorder forked before the sweep's start was known (``start_early``)."""


@dataclass
class _Start:
    """The start the callback (or a single run) keeps for the recorder: ``spec`` says what the recorder does, in
    plain values (it may be sent to a recorder forked before the callback ran); ``here`` does the start in the
    driver instead, as without a recorder."""

    sweep_dir: Optional[Path]
    """The sweep's folder; None for a single run."""
    spec: Tuple[Any, ...]
    """``("sweep", config, SweepContext, driver process, start ms)`` or ``("run", uri, experiment name, the
    JobRecord written as KILLED if the command dies before its job sends its own)``."""
    here: Callable[[], None]


def allow() -> None:
    """Let this process hand its runs' MLflow writes to a recorder (``python -m ipuexp`` says so)."""
    global _allowed
    _allowed = True


def defer(sweep_dir: Optional[Path], spec: Tuple[Any, ...], here: Callable[[], None]) -> bool:
    """Keep the callback's start for the launcher to hand to a recorder (True), or say it must be done now."""
    global _pending
    if not _allowed or not hasattr(os, "fork"):
        return False
    _pending = _Start(sweep_dir, spec, here)
    return True


def start_here() -> None:
    """Do a kept start in this process (a sweep on Ray: its workers look for the parent run); a recorder forked
    early for it is let go."""
    global _pending, _early
    pending, _pending = _pending, None
    early, _early = _early, None
    if early is not None:
        early.close("quit")
    if pending is not None:
        pending.here()


def start_early(serve_early: Callable[[Any], int]) -> None:
    """Fork the recorder as ``python -m ipuexp`` starts, before its command line is checked: it imports MLflow on
    the other core meanwhile (``serve_early(its end of the pipe)``), then opens the store it is told (``open_early``)
    and waits for the start the run or the Hydra callback keeps (``start_aside``). Let go unopened (``drop_early``,
    and as this process exits), it is ended at once."""
    global _early
    if _early is None:
        _early = _fork(serve_early, None)
        if _early is not None:
            _early.opened = False
            atexit.register(drop_early)


def open_early(uri: str) -> bool:
    """Tell the recorder forked early to open the store ``uri``; False when there is none."""
    if _early is None:
        return False
    try:
        _early.conn.send(("open", uri))
    except OSError:
        return False
    _early.opened = True
    return True


def drop_early() -> None:
    """End the recorder forked early when no store was opened for it: it has only been importing."""
    global _early
    if _early is not None and not _early.opened:
        rec, _early = _early, None
        try:
            os.kill(rec.pid, signal.SIGKILL)
            os.waitpid(rec.pid, 0)
        except OSError:
            pass
        rec.conn.close()


def _close_in_child() -> None:
    """A process forked later (a chart's helper, the warm worker) holds no end of the recorder's pipe, so the
    recorder sees the pipe close as soon as the command is gone (and records a killed run as KILLED then)."""
    for rec in (_active, _early):
        if rec is not None:
            rec.conn.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)


def start_aside(serve: Callable[[Any, Tuple[Any, ...]], int]) -> None:
    """Hand a kept start to the recorder (forking it now, to run ``serve(its end of the pipe, spec)``, unless it was
    forked early); where this process cannot fork safely (other threads), do the start here."""
    global _pending, _active, _early
    pending, _pending = _pending, None
    if pending is None or _active is not None:
        return
    if _early is not None and _early.opened:
        rec, _early = _early, None
        try:
            rec.conn.send(("start", pending.spec))
        except OSError:
            rec.close("quit")
            rec = None
    else:
        rec = _fork(lambda conn: serve(conn, pending.spec), pending.sweep_dir)
    if rec is None:
        pending.here()
        return
    rec.sweep_dir = pending.sweep_dir
    _active = rec
    atexit.register(finish, "KILLED")  # an early exit (Ctrl-C) skips the callback's end


def _fork(serve: Callable[[Any], int], sweep_dir: Optional[Path]) -> Optional["Recorder"]:
    """The recorder process running ``serve(its end of the pipe)``, or None where forking is not safe: a process with
    other threads, or with a store connection of its own (SQLite's must not cross a fork); ``python -m ipuexp``
    forks before it opens the store."""
    from ipuexp.tracking.store import has_clients

    if not can_fork() or has_clients():
        return None
    from multiprocessing.connection import Pipe

    parent_end, child_end = Pipe()
    flush_streams()  # what this process has buffered is written once, not again by the child
    pid = os.fork()
    if pid == 0:
        parent_end.close()
        code = 1
        try:
            code = serve(child_end)
        finally:
            flush_streams()
            from ipuexp.tracking.store import close_stores

            close_stores()  # os._exit skips atexit: the store's -wal and -shm files go with its last connection
            os._exit(code)
    child_end.close()
    return Recorder(pid, parent_end, sweep_dir)




def active() -> Optional["Recorder"]:
    """The recorder of this process's sweep or run, if it has one."""
    return _active


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
        self.opened = True
        """False for a recorder forked early that has not been given its store yet."""
        self.sent = self.answered = 0
        """Runs sent that ask for an answer, and answers read: the runs written."""

    def resumed(self) -> FrozenSet[str]:
        """The config hashes finished in a lost sweep this one resumes, once the recorder has read them (empty
        before)."""
        if self._resumed is None:
            try:
                if self.conn.poll():
                    self._read()
            except (EOFError, OSError):
                self._resumed = frozenset()
        return self._resumed or frozenset()

    def wait_run(self) -> Tuple[Optional[str], Optional[str]]:
        """The id of the run just sent (``JobRecord.reply``) and what the store said if it failed."""
        try:
            while True:
                message = self._read()
                if message[0] == "run":
                    return message[1], message[2]
        except (EOFError, OSError):
            return None, "the MLflow recorder stopped"

    def take_answers(self, wait: bool) -> int:
        """Read the answers that have come (with ``wait``, all those owed); returns how many runs are written. A
        recorder that is gone owes nothing more."""
        try:
            while self.answered < self.sent and (wait or self.conn.poll()):
                self._read()
        except (EOFError, OSError):
            self.answered = self.sent
        return self.answered

    def _read(self) -> Tuple[Any, ...]:
        message = self.conn.recv()
        if message[0] == "run":
            self.answered += 1
        elif message[0] == "resumed" and self._resumed is None:
            self._resumed = frozenset(message[1])
        return message

    def send(self, record: JobRecord) -> None:
        if record.reply:
            self.sent += 1
        try:
            self.conn.send(("job", record))
        except (BrokenPipeError, OSError):
            log.warning(f"the MLflow recorder of the sweep has stopped: the run of {' '.join(record.overrides)} "
                        "is not recorded (its result is in the job's folder)")

    def close(self, how: str) -> None:
        """``end`` the sweep, or ``KILLED`` (the driver exits early), or ``quit`` (a recorder with nothing to do);
        wait for the recorder."""
        try:
            self.conn.send(("end", how))
        except (BrokenPipeError, OSError):
            pass
        if how == "quit":  # it may still be importing MLflow: it reads this once done, and ends
            self.conn.close()
            return
        while True:
            try:
                _, status = os.waitpid(self.pid, 0)
                break
            except InterruptedError:
                continue
        self.conn.close()
        if how != "quit" and not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            log.warning("the MLflow recorder of the sweep ended with an error (see above); the jobs' results are "
                        "in their folders")
