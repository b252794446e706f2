"""The basic sweeper's sweep (``hydra/sweeper: ipuexp``, ``hydra_plugins.ipuexp.sweeper.PreflightSweeper``): every
batch of Hydra's grid run, and one summary of the whole sweep at its end, whatever launcher ran it.

As Hydra's ``BasicSweeper``, the sweep stops after the first batch with a failed job (``max_batch_size`` splits the
sweep into batches; without it the sweep is one batch, so every point runs). The sweep's table is printed once, at
its end (``ipuexp.runner.tally``), whatever launcher ran the batches, and a failed point then ends the command with
its one line (exit status 1), raised as the job's own exception type.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, List


def sweep(sweeper: Any, arguments: List[str]) -> Any:
    """Run ``sweeper``'s (a ``BasicSweeper`` set up by Hydra) batches through its launcher; the launchers' returns,
    batch by batch."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from ipuexp.runner.errors import JobFailedError, describe, job_error
    from ipuexp.runner.tally import Tallied, Tally, show_summary

    assert sweeper.config is not None and sweeper.launcher is not None and sweeper.hydra_context is not None
    parser = OverridesParser.create(config_loader=sweeper.hydra_context.config_loader)
    sweeper.overrides = sweeper.split_arguments(
        parser.parse_overrides(sweeper._parse_config() + list(arguments)), sweeper.max_batch_size)
    sweep_dir = Path(str(sweeper.config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(sweeper.config, sweep_dir / "multirun.yaml")
    tally = Tally(total=sum(len(b) for b in sweeper.overrides), show=show_summary(sweeper.config))
    launcher = Tallied(sweeper.launcher, tally)
    returns = []
    initial_job_idx = 0
    try:
        while not sweeper.is_done() and tally.first_failure() is None:
            batch = sweeper.get_job_batch()
            returns.append(launcher.launch(batch, initial_job_idx=initial_job_idx))
            initial_job_idx += len(batch)
    except KeyboardInterrupt:  # what finished (ipuexp's launcher has printed it already, with its batch)
        tally.print(f"Interrupted sweep {sweeper.config.hydra.sweep.dir}")
        raise
    tally.print(f"Sweep {sweeper.config.hydra.sweep.dir}")
    error = tally.first_failure()
    if error is not None:  # the table lists every failure; the command ends on the first one's line
        raise error if isinstance(error, JobFailedError) else job_error(error, describe(error))
    return returns
