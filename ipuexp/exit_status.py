"""How every command ends and says why: its exit statuses, and a refusal or failure as one line on stderr that
names the command (``ipuexp.plan: config error: plan.top_k=0: ...``)."""
from __future__ import annotations

import sys

EXIT_FAILED = 1
"""The work failed (a failed sweep point, a fit that did not converge, a store that failed as a run ended)."""
EXIT_BAD_INPUT = 2
"""Bad input, refused before any work: one line naming the key, the value and what is allowed."""
EXIT_DOES_NOT_FIT = 3
"""A single run whose configuration does not fit in IPU memory, with ``report.fail_on_oom=true``."""
EXIT_INTERRUPTED = 130
"""Ctrl-C, as a shell reports SIGINT."""


def fail(command: str, text: str, status: int) -> int:
    """Print ``command: text`` on stderr; return ``status`` for the command to exit with."""
    print(f"{command}: {text}", file=sys.stderr)
    return status
