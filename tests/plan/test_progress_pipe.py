"""The planner's progress bar belongs to a terminal: written to a pipe or a log, it writes nothing."""
from __future__ import annotations

import io

from ipuexp.plan.stats import progress_bar


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_progress_frames_in_a_pipe(monkeypatch):
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    bar = progress_bar(None, quiet=False)
    for _ in range(50):
        bar.update(1)
    bar.set_postfix_str("best 1 samples/s")
    bar.close()
    assert pipe.getvalue() == ""


def test_progress_on_a_terminal(monkeypatch):
    tty = _Tty()
    monkeypatch.setattr("sys.stderr", tty)
    bar = progress_bar(None, quiet=False)
    bar.update(3)
    bar.refresh()
    bar.close()
    assert "planning" in tty.getvalue()
