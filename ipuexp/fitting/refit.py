"""The refit of ``python -m ipuexp.calibrate``: the fitted constants refitted on the shipped calibration rows and a
user's measured runs (or on the measured runs alone), every row's prediction before and after, the leave-one-out
refits that give the constants' ranges and the residuals of the new error bands.

Only the constants of ``FITTED`` move: hardware- and host-software-level, shared by every model. A family the
refit leaves far off (``FAR_OFF_PCT``) is one whose time the model does not explain; no per-model factor is learnt.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from ipuexp.calibration import family
from ipuexp.calibration.band import Residual
from ipuexp.calibration.evidence import residual_of
from ipuexp.fitting.fit import FITTED, Case, fit_and_held_out, predict
from ipuexp.fitting.measured_runs import MeasuredCase

MODES = {"shipped+measured": "the shipped calibration rows and the measured runs",
         "measured": "the measured runs alone"}
FAR_OFF_PCT = 20.0
"""A family whose measured rows stay further off than this after the refit (median absolute error, percent) is
named: the validation gate of a single row (``validate.yaml`` max_row_error)."""


class FitFailed(RuntimeError):
    """The refit could not be made (too few rows, or the optimiser failed): one line; nothing is written."""


@dataclass
class Line:
    """One row's predictions: ``before`` with the replaced constants, ``after`` with the refitted ones, ``loo``
    with the constants refitted without it (None for a row not fitted: ``after`` is held out already)."""

    case: Case
    before: float
    after: float = 0.0
    loo: Optional[float] = None
    fitted: bool = True
    measured: Optional[MeasuredCase] = None
    was_fitted: bool = True
    """A shipped row the shipped constants were fitted to (not one of validate.yaml's unexplained rows)."""

    @property
    def target(self) -> float:
        return self.case.row.published

    def error(self, value: Optional[float]) -> Optional[float]:
        return None if value is None else 100.0 * (value / self.target - 1.0)

    @property
    def held_out_error(self) -> float:
        """The error of the prediction made without this row: its leave-one-out one, or ``after`` when unfitted."""
        value = self.error(self.loo if self.fitted else self.after)
        return float("nan") if value is None else value


@dataclass
class Refit:
    mode: str
    replaced: Dict[str, float]
    constants: Dict[str, float]
    mine: List[Line]
    shipped: List[Line]
    loo_constants: Dict[str, Dict[str, float]] = field(default_factory=dict)

    def loo_range(self) -> Dict[str, List[float]]:
        out: Dict[str, List[float]] = {}
        for name in self.constants:
            values = [c[name] for c in self.loo_constants.values()]
            if values:
                out[name] = [min(values), max(values)]
        return out

    def residuals(self) -> List[Residual]:
        """The held-out error of every row (fitted: leave-one-out; not fitted: under the refitted constants). A
        measured family still far off after the refit (``far_off``) is marked unexplained, as the shipped rows of
        ``validate.yaml`` are: its bands then cover that error wherever it runs (``calibration.band``)."""
        far = {fam for fam, _ in self.far_off()}
        out = []
        for lines, measured in ((self.shipped, False), (self.mine, True)):
            for line in lines:
                r = line.case.row
                err = line.held_out_error
                if not math.isnan(err):
                    explained = line.fitted and not (measured and r.family in far)
                    out.append(residual_of(r, err, line.case.point, fitted=explained))
        return out

    def far_off(self) -> List[Tuple[str, float]]:
        """Families of measured rows still more than FAR_OFF_PCT off after the refit, with their median error."""
        out = []
        for fam in dict.fromkeys(family(line.case.row.model) for line in self.mine):
            median = statistics.median(line.error(line.after) or 0.0 for line in self.mine
                                       if line.case.row.family == fam)
            if abs(median) > FAR_OFF_PCT:
                out.append((fam, median))
        return out

    def self_explained(self) -> List[Tuple[str, float, float]]:
        """Families of measured rows within FAR_OFF_PCT after the refit but not without themselves: their leave-one-out
        prediction (median error) is still further off, so no other row confirms what moved. (family, after, LOO)."""
        out = []
        for fam in dict.fromkeys(family(line.case.row.model) for line in self.mine):
            lines = [line for line in self.mine if line.case.row.family == fam and line.loo is not None]
            if not lines:
                continue
            after = statistics.median(line.error(line.after) or 0.0 for line in lines)
            loo = statistics.median(line.held_out_error for line in lines)
            if abs(after) <= FAR_OFF_PCT < abs(loo):
                out.append((fam, after, loo))
        return out


def refit(shipped: Sequence[Case], unexplained: Sequence[Case], mine: Sequence[MeasuredCase],
          replaced: Dict[str, float], mode: str = "shipped+measured", leave_one_out: bool = True) -> Refit:
    """Refit ``FITTED`` on ``shipped`` and ``mine`` (``mode`` shipped+measured) or on ``mine`` alone (measured);
    ``unexplained`` rows (``validate.yaml``) are predicted, never fitted. Raises FitFailed."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is invalid: allowed {', '.join(MODES)}")
    if not mine:
        raise FitFailed("no measured run to fit on")
    if mode == "measured" and len(mine) < 2 and leave_one_out:
        raise FitFailed("a calibration on the measured runs alone needs two or more (its error band comes from "
                        "predicting each without it); add a run, or refit with the shipped rows")
    mine_lines = [Line(m.case, m.before, measured=m) for m in mine]
    shipped_lines = [Line(c, predict(c, replaced), fitted=mode != "measured") for c in shipped]
    shipped_lines += [Line(c, predict(c, replaced), fitted=False, was_fitted=False) for c in unexplained]
    fitted = [line for line in shipped_lines + mine_lines if line.fitted]
    cases = [line.case for line in fitted]
    try:
        # The fit and the leave-one-out refits together, on both cores.
        loo = leave_one_out and len(cases) > 1
        constants, refits = fit_and_held_out(cases, replaced, ["leave-one-out"] if loo else [])
        result = Refit(mode, dict(replaced), constants, mine_lines, shipped_lines)
        for line in shipped_lines + mine_lines:
            line.after = predict(line.case, constants)
        if loo:
            preds, consts = refits["leave-one-out"]
            result.loo_constants = consts
            for i, value in preds.items():
                fitted[i].loo = value
    except (ValueError, ArithmeticError, RuntimeError) as err:  # scipy's or a prediction's: one line
        raise FitFailed(f"the fit failed: {' '.join(str(err).split())[:300]}") from None
    if not all(math.isfinite(v) and v > 0 for v in constants.values()):
        raise FitFailed(f"the fit failed: constants {constants}")
    return result


def bounds_hit(constants: Dict[str, float]) -> List[str]:
    """Constants the fit left at a bound of their physical range: the rows ask for more than the range allows."""
    return [k for k, v in constants.items() if v <= FITTED[k][0] * 1.001 or v >= FITTED[k][1] * 0.999]
