"""Optuna's grid sampler under Hydra's Optuna sweeper, whose trials are asked and told one by one.

Once the grid is used up, ``GridSampler.after_trial`` calls ``study.stop()``, which Optuna allows only inside
``study.optimize`` (optuna issue 4121). hydra-optuna-sweeper 1.3 tolerates that ``RuntimeError`` when it tells a
COMPLETE trial but not when it tells a FAILED one, so a grid whose last trial does not fit in memory used to end the
whole sweep with a traceback. The sweeper asks exactly as many trials as the grid has, so nothing is left to stop:
the error is ignored in both cases, as the sweeper itself ignores it for the first.
"""
from __future__ import annotations

from typing import Any

_STOP_OUTSIDE_OPTIMIZE = "`Study.stop` is supposed to be invoked inside an objective function or a callback."


def tolerate_grid_stop() -> None:
    """Make ``optuna.samplers.GridSampler.after_trial`` ignore the stop it cannot make outside ``optimize``
    (idempotent)."""
    from optuna.samplers import GridSampler

    original = GridSampler.after_trial
    if getattr(original, "_ipuexp_tolerates_stop", False):
        return

    def after_trial(self: Any, study: Any, trial: Any, state: Any, values: Any) -> None:
        try:
            original(self, study, trial, state, values)
        except RuntimeError as err:
            if str(err) != _STOP_OUTSIDE_OPTIMIZE:
                raise

    after_trial._ipuexp_tolerates_stop = True  # type: ignore[attr-defined]
    GridSampler.after_trial = after_trial  # type: ignore[method-assign]
