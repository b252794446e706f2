"""A process forked as ``python -m ipuexp`` starts, which loads what a task needs while the command line is checked
and composed, then does one task (a single run's charts).

Checking and composing take about half a second on one core; matplotlib and the engine's modules take a quarter of
a second to import. Loaded on the other core meanwhile, they cost a single run nothing: the worker gets its task
the moment the job starts (``submit``). A worker no job takes (a sweep, a configuration error, charts turned off)
is ended as soon as that is known (``drop``), or as this process exits.

A task that fails in the worker (or a worker that could not be forked: no ``fork``, other threads) changes nothing
but where the work runs: ``join`` reports it, and the caller does the work itself.
"""
from __future__ import annotations

import atexit
import importlib
import logging
import os
import signal
from typing import TYPE_CHECKING, Any, Callable, Optional, Tuple

from ipuexp.runner.forking import can_fork, end_with_parent, flush_streams

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

_worker: Optional[Tuple[int, "Connection"]] = None
"""The worker's process id and this process's end of its pipe, until a task takes it or it is dropped."""
_kept: Any = None
"""In the worker: what its task returned."""


def start(preload: str) -> None:
    """Fork the worker; it calls ``preload`` (``"module:function"``) and waits for its task. Nothing where this
    process cannot fork safely (``forking.can_fork``)."""
    global _worker
    if _worker is not None or not can_fork():
        return
    from multiprocessing.connection import Pipe

    ours, theirs = Pipe()
    flush_streams()
    try:
        pid = os.fork()
    except OSError:
        return
    if pid == 0:
        ours.close()
        code = 1
        try:
            code = _serve(theirs, preload)
        finally:
            os._exit(code)  # neither this process's exit handlers nor a traceback: the parent reports
    theirs.close()
    _worker = (pid, ours)
    atexit.register(drop)


def _close_in_child() -> None:
    """A process forked later (the MLflow recorder, a chart's helper) holds no end of the worker's pipe, so the
    worker sees the pipe close when this process is gone."""
    if _worker is not None:
        _worker[1].close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)


def _serve(conn: "Connection", preload: str) -> int:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends it with the command
    end_with_parent()  # and so does the command's death, kill -9 included
    logging.disable(logging.CRITICAL)  # the command reports; a warning here would be a second copy
    module, _, function = preload.partition(":")
    getattr(importlib.import_module(module), function)()
    try:
        work, args, folder = conn.recv()
    except (EOFError, OSError):  # dropped, or the command ended
        return 0
    os.chdir(folder)  # where the caller is now (a Hydra job may have moved into its run folder)
    global _kept
    _kept = work(*args)  # never freed: this process ends without (hundreds of thousands of events)
    conn.send("done")  # the caller goes on while this process's memory is given back
    return 0


def submit(work: Callable[..., Any], *args: Any) -> Optional[Callable[[], bool]]:
    """Give the worker its task, ``work(*args)`` (a module-level function: it is sent by name, its arguments
    pickled), to run in this process's current folder. Returns ``join()``, which waits for the worker and says whether the task was done; None when no
    worker waits (not forked, already taken, or the pipe is gone)."""
    global _worker
    if _worker is None:
        return None
    (pid, conn), _worker = _worker, None
    try:
        conn.send((work, args, os.getcwd()))
    except Exception:  # the pipe is gone, or the task cannot be pickled
        _end(pid, conn)
        return None

    def join() -> bool:
        try:
            done = conn.recv() == "done"
        except (EOFError, OSError):
            done = False
        conn.close()
        _reap(pid, wait=not done)
        return done

    return join


def drop() -> None:
    """End a worker no task took: it has only been importing."""
    global _worker
    if _worker is not None:
        (pid, conn), _worker = _worker, None
        _end(pid, conn)


def _reap(pid: int, wait: bool) -> None:
    """Collect the worker's exit status: a worker that has done its task may still be giving its memory back (a few
    hundredths of a second, which nobody need wait for); it is collected as this process exits, or by the system
    after it."""
    try:
        if os.waitpid(pid, 0 if wait else os.WNOHANG)[0] == 0:
            atexit.register(_reap, pid, False)
    except ChildProcessError:
        pass


def _end(pid: int, conn: "Connection") -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass
    conn.close()
