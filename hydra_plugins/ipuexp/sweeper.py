"""Hydra's basic sweeper without its batch pre-composition, registered as ``hydra/sweeper: ipuexp``; its sweep
(every batch run, one summary at the end) is ``ipuexp.sweeps.basic``.

Hydra's ``BasicSweeper`` composes every job of a batch before handing it to the launcher, to find a bad override
early; the launcher then composes each job again. ``python -m ipuexp`` already checks every swept value before
Hydra starts (``ipuexp.commands.run.preflight``), and ipuexp's launcher composes each job while the workers run the
ones before it, failing a job whose configuration cannot be composed on its own. Composing the batch twice cost
about 90 ms per job on the driver before the first job could start (9 s for 100 points on two cores).
"""
from typing import Any, List, Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper


class PreflightSweeper(BasicSweeper):
    """``BasicSweeper`` (same sweep parameters, batches and job numbering) that leaves composition to the
    launcher and summarises the whole sweep."""

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        return None

    def sweep(self, arguments: List[str]) -> Any:
        from ipuexp.sweeps.basic import sweep

        return sweep(self, arguments)
