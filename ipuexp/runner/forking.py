"""What ipuexp checks and does before it forks a helper process (a run's charts, the MLflow recorder, the warm
worker)."""
from __future__ import annotations

import os
import sys
import threading


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
