"""Hydra's basic sweeper without its batch pre-composition, registered as ``hydra/sweeper: ipuexp``; it ends a sweep
with one summary, whatever launcher ran it.

Hydra's ``BasicSweeper`` composes every job of a batch before handing it to the launcher, to find a bad override
early; the launcher then composes each job again. ``python -m ipuexp`` already checks every swept value before
Hydra starts (``ipuexp.__main__.preflight``), and ipuexp's launcher composes each job while the workers run the
ones before it, failing a job whose configuration cannot be composed on its own. Composing the batch twice cost
about 90 ms per job on the driver before the first job could start (9 s for 100 points on two cores).

``BasicSweeper`` also stops at the first batch with a failed job and leaves any summary to the launcher, batch by
batch. Here every batch runs, the sweep's table is printed once at its end (``ipuexp.runner.tally``), and a failed
point then ends the command with its one line (exit status 1).
"""
from pathlib import Path
from typing import Any, List, Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper


class PreflightSweeper(BasicSweeper):
    """``BasicSweeper`` (same sweep parameters, batches and job numbering) that leaves composition to the
    launcher and summarises the whole sweep."""

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        return None

    def sweep(self, arguments: List[str]) -> Any:
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from omegaconf import OmegaConf

        from ipuexp.runner.errors import JobFailedError, describe
        from ipuexp.runner.tally import Tallied, Tally, show_summary

        assert self.config is not None and self.launcher is not None and self.hydra_context is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        self.overrides = self.split_arguments(parser.parse_overrides(self._parse_config() + list(arguments)),
                                              self.max_batch_size)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        tally = Tally(total=sum(len(b) for b in self.overrides), show=show_summary(self.config))
        launcher = Tallied(self.launcher, tally)
        returns = []
        initial_job_idx = 0
        try:
            while not self.is_done():
                batch = self.get_job_batch()
                returns.append(launcher.launch(batch, initial_job_idx=initial_job_idx))
                initial_job_idx += len(batch)
        except KeyboardInterrupt:  # what finished (ipuexp's launcher has printed it already, with its batch)
            tally.print(f"Interrupted sweep {self.config.hydra.sweep.dir}")
            raise
        tally.print(f"Sweep {self.config.hydra.sweep.dir}")
        error = tally.first_failure()
        if error is not None:  # the table lists every failure; the command ends on the first one's line
            raise error if isinstance(error, JobFailedError) else JobFailedError(describe(error),
                                                                                 type(error).__name__)
        return returns
