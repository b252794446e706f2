"""The ``ipuexp.poptorch`` logger. PopTorch's warnings reach the terminal (stderr) as PopTorch's own do, with no
logging set up by the script; where the root logger already writes to the terminal (a Hydra job's console handler)
they are left to it, not shown twice. They propagate either way (Hydra's job log file, pytest's caplog)."""
from __future__ import annotations

import logging
import sys

log = logging.getLogger("ipuexp.poptorch")


class _Console(logging.StreamHandler):
    """stderr, unless a root handler writes to the terminal's streams already."""

    def emit(self, record: logging.LogRecord) -> None:
        consoles = (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
        if any(getattr(h, "stream", None) in consoles for h in logging.getLogger().handlers):
            return
        self.stream = sys.stderr  # the stream of the moment (pytest's capture replaces it)
        super().emit(record)


if not any(isinstance(h, _Console) for h in log.handlers):
    _handler = _Console()
    _handler.setFormatter(logging.Formatter("ipuexp.poptorch: %(levelname)s: %(message)s"))
    _handler.setLevel(logging.WARNING)
    log.addHandler(_handler)
