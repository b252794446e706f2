"""Hydra's Optuna sweeper as ``python -m ipuexp`` runs it (``hydra/sweeper=optuna``): one summary when the study
ends, in agreement with ``optimization_results.yaml``. The sweeper class itself is
``hydra_plugins.ipuexp_ray_launcher.optuna_sweeper`` (Hydra instantiates plugins from ``hydra_plugins`` only).

hydra-optuna-sweeper 1.3 asks the launcher for ``n_jobs`` trials at a time and logs the study's best parameters and
value, every digit of them, when it ends. Here each batch goes through ``ipuexp.runner.tally.Tallied``: ipuexp's
launcher prints no table per batch, and a trial that failed comes back without Hydra's "Error executing job" line,
since one that does not fit in memory is an outcome the study expects (the sweeper logs it as "Failed experiment:
does not fit in IPU memory: ..."). The study ends with the sweep's table, whose best point is the study's best trial
as written to ``optimization_results.yaml``. Optuna 2.x logs in colour to stderr whatever that is; its records go
through Hydra's logging instead, without escape codes.
"""
from __future__ import annotations

import contextlib
import functools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional

from ipuexp.runner import summary
from ipuexp.runner.tally import Tallied, Tally, show_summary

if TYPE_CHECKING:
    from ipuexp.config.types import ConfigNode

RESULTS = "optimization_results.yaml"
"""Where hydra-optuna-sweeper writes the study's best parameters and value, in the sweep folder."""

_IMPL_LOGGER = "hydra_plugins.hydra_optuna_sweeper._impl"
_REPLACED = ("Best parameters:", "Best value:")
"""The sweeper's closing lines, which the summary replaces."""


def tally_trials(impl: Any, config: ConfigNode) -> Tally:
    """After the sweeper's setup: its launcher's batches recorded in a new tally, which is returned."""
    tally = Tally(total=impl.n_trials, show=show_summary(config))
    impl.launcher = Tallied(impl.launcher, tally, total=lambda: impl.n_trials)
    return tally


def run_study(impl: Any, tally: Tally, sweep_dir: Path, arguments: List[str]) -> None:
    """``impl.sweep(arguments)`` (hydra-optuna-sweeper's study), then the sweep's summary; what ran is summarised
    also when the study stops early (every trial failed, ``max_failure_rate``, Ctrl-C)."""
    _plain_optuna_logging()
    if _grid(impl.sampler):
        from ipuexp.runner.optuna_grid import tolerate_grid_stop

        tolerate_grid_stop()
    title = f"Sweep {sweep_dir}"
    try:
        with _without_closing_lines():
            impl.sweep(arguments)
    except BaseException:
        tally.print(title)
        raise
    path = sweep_dir / RESULTS
    top = best_trial(tally.outcomes, _best_params(path))
    tally.print(title, top=top, source=f"the study's best, as in {path}" if top is not None else "")


def best_trial(outcomes: List[summary.Outcome], params: Optional[Dict[str, Any]]) -> Optional[summary.Outcome]:
    """The first trial whose overrides are the study's best ``params`` (``best_params`` of the results file)."""
    if not params:
        return None
    for o in sorted(outcomes, key=lambda o: o.idx):
        values = dict(ov.partition("=")[::2] for ov in o.overrides)
        completed = o.status in (summary.DONE, summary.SKIPPED)  # the study's FAILED trials include the OOM ones
        if completed and all(values.get(k) == str(v) for k, v in params.items()):
            return o
    return None


def _best_params(path: Path) -> Optional[Dict[str, Any]]:
    from omegaconf import OmegaConf

    if not path.is_file():
        return None
    params = OmegaConf.select(OmegaConf.load(path), "best_params")  # a multi-objective study writes solutions
    return dict(OmegaConf.to_container(params)) if params is not None else None


def _grid(sampler: Any) -> bool:
    from optuna.samplers import GridSampler

    return isinstance(sampler, GridSampler) or (isinstance(sampler, functools.partial) and
                                                sampler.func is GridSampler)


def _plain_optuna_logging() -> None:
    """Optuna's records through the root logger (Hydra's handlers, no colour), warnings and worse only: the
    sweeper itself says which study it made."""
    import optuna

    optuna.logging.disable_default_handler()
    optuna.logging.enable_propagation()
    optuna.logging.set_verbosity(optuna.logging.WARNING)


class _ClosingLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_REPLACED)


@contextlib.contextmanager
def _without_closing_lines() -> Iterator[None]:
    logger, closing = logging.getLogger(_IMPL_LOGGER), _ClosingLines()
    logger.addFilter(closing)
    try:
        yield
    finally:
        logger.removeFilter(closing)
