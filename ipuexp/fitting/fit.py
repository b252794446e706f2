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

__all__ = ["FITTED", "PRIORS", "Case", "prepare", "predict", "fit", "held_out", "held_out_modes", "fit_and_held_out", "rounded"]

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


def predict(case: Case, constants: Optional[Dict[str, float]] = None, block_memo: Optional[Dict] = None) -> float:
    """Samples (packed rows: sequences) per second of a case, with ``constants`` replacing the configured calibration values (the case
    itself is not changed). ``block_memo``: the case's block cycles by tile context, kept across a fit's calls
    (``emulator.timing.analyse``)."""
    from ipuexp.emulator.timing import estimate_throughput

    plan = case.plan.with_calibration(constants) if constants else case.plan
    figures = estimate_throughput(plan, case.graph, block_memo=block_memo)
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

    # A case's block cycles depend on the constants only through its tile contexts: the steps of the Jacobian that
    # move a constant outside them (host, GW-Link) find them here.
    memos: List[Dict] = [{} for _ in cases]

    def residuals(x: Any) -> Any:
        consts = dict(zip(names, np.exp(x)))
        rows = [math.log(predict(c, consts, m) / c.row.published) for c, m in zip(cases, memos)]
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
    return held_out_modes(cases, [mode])[mode]


def held_out_modes(cases: Sequence[Case], modes: Sequence[str],
                   workers: Optional[int] = None) -> Dict[str, Tuple[Dict[int, float], Dict[str, Dict[str, float]]]]:
    """``held_out`` for each of ``modes``. The refits are independent, so they run in up to ``workers`` forked
    processes (default: two where the machine has two cores); each is the same computation as in this process, so
    the answers do not depend on where it ran."""
    return fit_and_held_out(cases, None, modes, workers)[1]


def fit_and_held_out(cases: Sequence[Case], start: Optional[Dict[str, float]], modes: Sequence[str],
                     workers: Optional[int] = None
                     ) -> Tuple[Optional[Dict[str, float]], Dict[str, Tuple[Dict[int, float], Dict[str, Dict[str, float]]]]]:
    """The fit on every case from ``start`` (rounded; None when ``start`` is None) and ``held_out_modes``, the fit
    one more task beside the refits."""
    tasks: List[Tuple[str, Optional[str], Tuple[int, ...], Optional[Dict[str, float]]]] = []
    if start is not None:
        tasks.append(("in-sample", None, (), dict(start)))
    tasks += [(mode, name, tuple(idx), None) for mode in modes for name, idx in groups(cases, mode).items()
              if len(idx) < len(cases)]
    out: Dict[str, Tuple[Dict[int, float], Dict[str, Dict[str, float]]]] = {mode: ({}, {}) for mode in modes}
    constants = None
    for mode, name, fitted, preds in _run_refits(cases, tasks, workers):
        if name is None:
            constants = fitted
            continue
        out[mode][1][name] = fitted
        out[mode][0].update(preds)
    return constants, out


_CASES: Sequence[Case] = ()
"""The cases a forked refit worker reads (set before the workers start: nothing is pickled but indices)."""


def _refit(task: Tuple[str, Optional[str], Tuple[int, ...], Optional[Dict[str, float]]]
           ) -> Tuple[str, Optional[str], Dict[str, float], Dict[int, float]]:
    mode, name, idx, start = task
    others = [c for j, c in enumerate(_CASES) if j not in idx]
    fitted = rounded(fit(others, PRIORS if start is None else start))
    return mode, name, fitted, {i: predict(_CASES[i], fitted) for i in idx}


def _run_refits(cases: Sequence[Case], tasks: List[Tuple[str, Optional[str], Tuple[int, ...], Any]],
                workers: Optional[int]) -> List[Tuple[str, Optional[str], Dict[str, float], Dict[int, float]]]:
    import multiprocessing
    import os

    global _CASES
    n = min(2, os.cpu_count() or 1) if workers is None else workers
    _CASES = cases
    try:
        if n < 2 or len(tasks) < 2 or "fork" not in multiprocessing.get_all_start_methods():
            return [_refit(t) for t in tasks]
        with multiprocessing.get_context("fork").Pool(min(n, len(tasks))) as pool:
            return list(pool.imap(_refit, tasks, chunksize=1))
    finally:
        _CASES = ()
