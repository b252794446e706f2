"""A time limit on the user's code that the pre-flight check runs (importing ``model.target``'s module and calling
its factory): a module that loops or waits for input ends as an error, not a command that never answers."""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

TARGET_SECONDS = 60.0
"""Long enough for a large model built on the meta device; an import that takes longer is waiting on something."""


@contextlib.contextmanager
def time_limit(seconds: float, what: str) -> Iterator[None]:
    """Raise TimeoutError in the ``with`` block after ``seconds``. Only the main thread receives signals: elsewhere
    (a worker's thread) the block runs unlimited."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"{what} did not return within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
