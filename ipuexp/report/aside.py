"""Work done in a forked process while the caller goes on: the files a run writes besides its answer (the Gantt and
memory charts, the trace) take seconds of matplotlib and JSON, which the other core can spend while this process
opens the run's MLflow store or writes the trace.

A child that fails (or a platform without ``fork``, or a process with other threads) changes nothing but where the
work runs: ``join`` does it in this process, so the files are the same either way.
"""
from __future__ import annotations

import os
import signal
from typing import Callable

from ipuexp.runner.forking import can_fork, end_with_parent, flush_streams


def start_aside(work: Callable[[], object]) -> Callable[..., bool]:
    """Start ``work()`` in a forked process. Returns ``join(check=True)``: it waits for the child and, where the child
    did not finish ``work`` (or could not be forked), runs it in this process when ``check`` (returns whether the
    child did it)."""
    pid = 0
    if can_fork():  # else (other threads: a Ray worker) the work is done in ``join``
        flush_streams()
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:  # the child: work, then leave without running the parent's exit handlers
            code = 1
            try:
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                end_with_parent()  # SIGTERM, or the command's death, ends it through SystemExit
                work()
                code = 0
            finally:
                os._exit(code)

    def join(check: bool = True) -> bool:
        ok = False
        if pid > 0:
            _, status = os.waitpid(pid, 0)
            ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        if check and not ok:
            work()
        return ok

    return join
