"""What ipuexp checks and does before it forks a helper process (a run's charts, the MLflow recorder, the warm
worker)."""
from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

_PR_SET_PDEATHSIG = 1


def can_fork() -> bool:
    """Only a process with one thread forks: a child of a threaded one (a Ray worker) could wait forever on a lock
    another thread held at the fork (logging's, an import's)."""
    return hasattr(os, "fork") and threading.active_count() == 1


def flush_streams() -> None:
    """Write out what the standard streams hold, so that it is written once, not again by a child (and before a
    process ends without its interpreter's teardown)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def end_with_parent() -> None:
    """In a helper just forked (a run's charts, the warm worker): end it within moments of the command, even one
    killed outright (``kill -9``), instead of writing into a dead run's folder for seconds. Linux sends it SIGTERM
    as its parent dies (``PR_SET_PDEATHSIG``); SIGTERM ends it through ``SystemExit``, so a file it was writing is
    removed, not left half-written (``ipuexp.files.whole``). Elsewhere nothing changes."""
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    signal.signal(signal.SIGTERM, _leave)
    if os.getppid() != parent:  # the parent died before the request was made
        raise SystemExit(1)


def _leave(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)
