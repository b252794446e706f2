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


# PopTorch's log levels (its python/_logging.py): names, and the integers its legacy API takes.
_LEVELS = {"TRACE": (0, logging.DEBUG), "DEBUG": (1, logging.DEBUG), "INFO": (2, logging.INFO),
           "WARN": (3, logging.WARNING), "ERR": (4, logging.ERROR), "OFF": (6, logging.CRITICAL + 1)}


def set_level(level: object) -> None:
    """``poptorch.setLogLevel``: what this logger shows on stderr (ipuexp's own logging is unaffected)."""
    if isinstance(level, int) and not isinstance(level, bool):
        names = [name for name, (number, _) in _LEVELS.items() if number == level]
        if not names:
            raise ValueError("Invalid log level integer")
        level = names[0]
    if level not in _LEVELS:
        known = sorted(_LEVELS)
        raise ValueError(f"Unknown log level: {level}. Valid values are {', '.join(known[:-1])} and {known[-1]}")
    python_level = _LEVELS[str(level)][1]
    log.setLevel(python_level)
    for handler in log.handlers:
        if isinstance(handler, _Console):
            handler.setLevel(python_level)
