"""Fitting the calibration constants for ``python -m ipuexp.validate``: each calibration row prepared as a case (its
execution plan and captured graph) and predicted, the robust least-squares fit of the ``FITTED`` constants with a weak
prior, and the held-out refits (leave-one-out, -family-out, -size-out) that predict each row without its group.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from ipuexp.calibration import Row
from ipuexp.calibration.evidence import Point
from ipuexp.config.compose import compose_run
from ipuexp.calibration.fitted import FITTED, PRIORS

if TYPE_CHECKING:
    from ipuexp.graph.types import Graph
    from ipuexp.execution.execution import ExecutionPlan

__all__ = ["FITTED", "PRIORS", "Case", "prepare", "predict", "fit", "held_out", "rounded"]

MODES = ("in-sample", "leave-one-out", "leave-one-family-out", "leave-one-size-out")
"""How each row is predicted: with constants fitted on all rows, on all but the row, on all rows but the row's
model family (BERT, ResNet, ViT), on all rows but the row's system size (POD16, POD128, POD256)."""

PRIOR_WEIGHT = 0.05
"""Weight of each constant's log distance from its prior, in the units of a row's log error: a factor 2 away
from the prior costs what a 3.5% row error costs, so the rows decide wherever they can, and a direction they
cannot determine (a family left out) stays near the prior instead of running to a bound."""

ROBUST_SCALE = 0.05
"""Log error (about 5%) beyond which a row's residual counts linearly, not quadratically, in the fit."""


@dataclass(frozen=True)
class Case:
    """A calibration row ready to evaluate: its execution plan and captured graph."""

    row: Row
    plan: ExecutionPlan
    graph: Graph
    point: Optional[Point] = None
    """Where the row sits along the axes its error band grows on (``calibration.reach``)."""



def prepare(rows: Sequence[Row], cache_dir: Optional[str] = None) -> List[Case]:
    from ipuexp.emulator.memory import estimate_memory
    from ipuexp.emulator.position import point_of
    from ipuexp.graph.capture import capture
    from ipuexp.execution.execution import plan_for

    cases = []
    for row in rows:
        exp = compose_run(row.id)
        graph = capture(exp.model, exp.data.micro_batch_size, cache_dir=cache_dir or exp.engine.cache_dir)
        plan = plan_for(exp, graph)
        point = point_of(exp.model, graph.model, plan, estimate_memory(plan, graph))
        cases.append(Case(row, plan, graph, point))
    return cases


def predict(case: Case, constants: Optional[Dict[str, float]] = None) -> float:
    """Samples (packed rows: sequences) per second of a case, with ``constants`` replacing the configured calibration values (the case
    itself is not changed)."""
    from ipuexp.emulator.timing import estimate_throughput

    plan = case.plan.with_calibration(constants) if constants else case.plan
    figures = estimate_throughput(plan, case.graph)
    # A packed row's published throughput counts sequences; its samples are packs.
    return figures.sequences_per_s if figures.sequences_per_s is not None else figures.samples_per_s


def fit(cases: Sequence[Case], start: Dict[str, float]) -> Dict[str, float]:
    """Robust least squares on log(predicted / published) over ``cases`` for the FITTED constants
    (log-parameterised, within their physical ranges), each drawn weakly towards its prior (``PRIOR_WEIGHT``).
    Constants measured in cycles are shared by every generation in ``cases``."""
    import numpy as np
    from scipy.optimize import least_squares

    names = list(FITTED)
    lo = np.log([FITTED[n][0] for n in names])
    hi = np.log([FITTED[n][1] for n in names])
    # A constant the configuration does not set yet (0) starts from its prior.
    x0 = np.clip(np.log([start[n] if start[n] > 0 else PRIORS[n] for n in names]), lo + 1e-9, hi - 1e-9)

    prior = np.log([PRIORS[n] for n in names])

    def residuals(x: Any) -> Any:
        consts = dict(zip(names, np.exp(x)))
        rows = [math.log(predict(c, consts) / c.row.published) for c in cases]
        return np.array(rows + list(PRIOR_WEIGHT * (x - prior)))

    # Robust loss (soft L1 beyond ROBUST_SCALE): a row the model cannot explain (ViT-B/16, docs/emulator.md) is
    # reported with its real error instead of pulling every other row off.
    res = least_squares(residuals, x0, bounds=(lo, hi), diff_step=1e-3, xtol=1e-6, ftol=1e-8, loss="soft_l1",
                        f_scale=ROBUST_SCALE)
    return {n: float(v) for n, v in zip(names, np.exp(res.x))}


def rounded(constants: Dict[str, float]) -> Dict[str, float]:
    """Each constant to 4 significant digits, as the calibration blocks carry it."""
    return {k: float(f"{v:.4g}") for k, v in constants.items()}


def size_of(row: Row) -> str:
    return row.system or str(row.ipus)


def groups(cases: Sequence[Case], mode: str) -> Dict[str, List[int]]:
    """Left-out group -> indices of its cases, for a held-out mode."""
    key = {"leave-one-out": lambda c: c.row.id,
           "leave-one-family-out": lambda c: c.row.family,
           "leave-one-size-out": lambda c: size_of(c.row)}[mode]
    out: Dict[str, List[int]] = {}
    for i, c in enumerate(cases):
        out.setdefault(key(c), []).append(i)
    return out


def held_out(cases: Sequence[Case], mode: str) -> Tuple[Dict[int, float], Dict[str, Dict[str, float]]]:
    """Each case predicted with constants fitted without its group (from PRIORS); and the constants."""
    preds: Dict[int, float] = {}
    consts: Dict[str, Dict[str, float]] = {}
    for name, idx in groups(cases, mode).items():
        others = [c for j, c in enumerate(cases) if j not in idx]
        if not others:
            continue
        fitted = rounded(fit(others, PRIORS))
        consts[name] = fitted
        for i in idx:
            preds[i] = predict(cases[i], fitted)
    return preds, consts
