"""A sweep whose Ray cluster went away: what was lost, what finished, how to resume, in one line."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ClusterLoss:
    """A lost Ray cluster, as the launcher saw it.

    The launcher passes it to the Hydra callbacks' ``on_multirun_end`` as ``cluster_lost`` (Hydra itself does not
    call that hook for a sweep that raised); a callback that records the sweep so that a re-run can resume it says
    how in ``resume``.
    """

    cluster: str
    """"Ray cluster at HOST:PORT" or "the sweep's local Ray"."""
    reason: str
    """What is known of the loss, e.g. "the raylet on 10.0.0.5 died"."""
    total: int
    """Points in the sweep."""
    finished: int
    """Points that ran to the end (done or out of memory)."""
    failed: int = 0
    """Points that ended with an error before the loss."""
    resume: str = ""
    """How a re-run picks up, filled in by a callback that makes it possible."""

    @property
    def cause(self) -> str:
        """The error recorded with the sweep and with the runs it cut short."""
        return f"{self.cluster} was lost mid-sweep ({self.reason})"

    @property
    def message(self) -> str:
        """The line shown to the user."""
        failed = f" ({self.failed} failed)" if self.failed else ""
        resume = self.resume or f"re-running the command runs all {self.total} points again"
        return (f"ipuexp: {self.cause}: {self.finished} of {self.total} points finished, "
                f"{self.total - self.finished} did not{failed}; {resume}")


class ClusterLostError(SystemExit):
    """The sweep's Ray cluster went away. Its code is the one line: uncaught, Python prints it to stderr and exits
    with status 1 (Hydra would add a hint about stack traces to an ordinary exception)."""
