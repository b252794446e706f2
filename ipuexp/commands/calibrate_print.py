"""What ``python -m ipuexp.calibrate`` prints: the measured runs and the shipped rows before and after the refit,
the constants' shifts, the error bands before and after, the recipes asked for, and where the file went. Every
table fits the terminal by the rule of :mod:`ipuexp.terminal_table`: figures stay whole, row names fold.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Sequence

from ipuexp.calibration import Row
from ipuexp.calibration.band import Point, Residual, error_band, load_residuals
from ipuexp.fitting.refit import MODES, Refit, bounds_hit
from ipuexp.fitting.fit import Case, predict
from ipuexp.terminal_table import Column, Table


def _table(console: Any, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A name column (text that folds) and figures."""
    Table([Column(headers[0], figure=False), *(Column(h, figure=True) for h in headers[1:])], rows,
          title=title).print(console)


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:+.1f}"


def _band(row: Row, residuals: Optional[Sequence[Residual]], point: Optional[Point] = None) -> Optional[float]:
    band = error_band(row.model, row.ipus, row.micro_batch, row.grad_accum, residuals=residuals, ipu=row.ipu,
                      point=point if point is not None else _point(row.id, residuals))
    return None if band is None else band.pct


def _point(row_id: str, residuals: Optional[Sequence[Residual]]) -> Optional[Point]:
    """Where a row sits: from its own residual (the shipped ones when ``residuals`` is None)."""
    for r in (load_residuals() if residuals is None else residuals):
        if r.id == row_id:
            return r.point
    return None


def report(console: Any, result: Refit, residuals: Sequence[Residual], recipes: Sequence[Any]) -> None:
    console.print(f"Refitted on {MODES[result.mode]}: {sum(l.fitted for l in result.shipped + result.mine)} rows",
                  markup=False)
    mine = [[l.case.row.id, f"{l.target:,.0f}", f"{l.before:,.0f}", _pct(l.error(l.before)), f"{l.after:,.0f}",
             _pct(l.error(l.after)), _pct(l.error(l.loo)), _band_text(l.case.row, residuals)]
            for l in result.mine]
    _table(console, "Measured runs: predicted before and after the refit",
           ("run", "measured", "before", "err", "after", "err", "LOO", "band"), mine)
    console.print("samples/s (sequences/s for packed data); err: percent from the measured value; LOO: predicted "
                  "with the constants refitted without the run; band: the new error band", markup=False)
    fitted = result.mode != "measured"
    # The shipped fit's leave-one-out errors (ipuexp/calibration/residuals.csv), to set the new ones against.
    shipped_loo = {r.id: r.loo_error_pct for r in load_residuals()}
    unexplained = [l for l in result.shipped if not l.was_fitted]
    shipped = [[l.case.row.id + (" *" if l in unexplained else ""), f"{l.target:,.0f}", _pct(l.error(l.before)),
                _pct(l.error(l.after)), _pct(None if l in unexplained else shipped_loo.get(l.case.row.id)),
                _pct(l.error(l.loo) if l.fitted else None)] for l in result.shipped]
    _table(console, "Shipped calibration rows",
           ("row", "published", "before", "after", "LOO before", "LOO after"), shipped)
    console.print("before, after: error in percent" + ("" if fitted else " (after is held out: the refit did not "
                  "see these rows)") + "; LOO: predicted with the constants refitted without the row, before and "
                  "after; *: not fitted (validate.yaml unexplained)", markup=False)
    loo = [(shipped_loo.get(l.case.row.id), l.error(l.loo)) for l in result.shipped if l not in unexplained]
    pairs = [(a, b) for a, b in loo if a is not None and b is not None]
    if pairs:
        console.print(f"Shipped rows' leave-one-out MAPE: {sum(abs(a) for a, _ in pairs) / len(pairs):.1f}% before, "
                      f"{sum(abs(b) for _, b in pairs) / len(pairs):.1f}% after", markup=False)
    _constants(console, result)
    _bands(console, result, residuals)
    _warnings(console, result)
    if recipes:
        _recipes(console, result, residuals, recipes)


def _band_text(row: Row, residuals: Sequence[Residual]) -> str:
    pct = _band(row, residuals)
    return "-" if pct is None else f"±{pct:.0f}%"


def _constants(console: Any, result: Refit) -> None:
    ranges = result.loo_range()
    rows = []
    for k, v in result.constants.items():
        before = result.replaced[k]
        rng = ranges.get(k)
        rows.append([k, f"{before:.4g}", f"{v:.4g}", f"{100 * (v / before - 1):+.1f}%",
                     f"{rng[0]:.4g}..{rng[1]:.4g}" if rng else "-"])
    _table(console, "Fitted constants", ("constant", "before", "after", "shift", "LOO range"), rows)


def _bands(console: Any, result: Refit, residuals: Sequence[Residual]) -> None:
    parts = []
    for line in result.mine:
        row = line.case.row
        before, after = _band(row, None), _band(row, residuals)
        if before is not None and after is not None:
            text = f"{row.family} ±{before:.0f}% -> ±{after:.0f}%"
            if text not in parts:
                parts.append(text)
    if parts:
        console.print("Error band of the measured configurations, shipped -> new: " + ", ".join(parts), markup=False)


def _warnings(console: Any, result: Refit) -> None:
    for fam, median in result.far_off():
        console.print(f"{fam}: the measured runs stay {median:+.0f}% off after the refit. No shared constant "
                      "explains them: the model lacks a mechanism of this family, and it learns no per-model "
                      "factor; its predictions keep the wide band above"
                      + ("" if result.mode == "measured" else " (--measured-only fits the measured runs alone, at "
                         "the cost of every other family)") + ".", markup=False)
    for fam, after, loo in result.self_explained():
        console.print(f"{fam}: the measured runs come within {after:+.0f}% only through themselves: predicted "
                      f"without each (LOO) they stay {loo:+.0f}% off, so no other row confirms the constants they "
                      "moved; their band keeps that error.", markup=False)
    if result.mode == "measured" and result.shipped:
        worst = max(result.shipped, key=lambda l: abs(l.error(l.after) or 0.0))
        console.print(f"The shipped rows are up to {worst.error(worst.after):+.0f}% off under these constants "
                      f"({worst.case.row.id}): use this calibration for runs like the measured ones.", markup=False)
    hit = bounds_hit(result.constants)
    if hit:
        console.print(f"At a bound of its physical range: {', '.join(hit)}: the runs ask for more than the "
                      "hardware and host allow; suspect the measurement or a mechanism the model lacks.",
                      markup=False)


def _recipes(console: Any, result: Refit, residuals: Sequence[Residual], recipes: Sequence[Any]) -> None:
    from ipuexp.emulator.memory import estimate_memory
    from ipuexp.emulator.position import point_of
    from ipuexp.execution.execution import plan_for
    from ipuexp.graph.capture import capture

    rows = []
    for exp in recipes:
        graph = capture(exp.model, exp.data.micro_batch_size, cache_dir=exp.engine.cache_dir)
        plan = plan_for(exp, graph)
        row = Row(str(exp.recipe), str(exp.ipu.name), 0.0, graph.model, str(exp.system.name),
                  len(plan.ipus) * plan.replicas, int(exp.data.micro_batch_size),
                  int(exp.options.gradient_accumulation))
        case = Case(row, plan, graph, point_of(exp.model, graph.model, plan, estimate_memory(plan, graph)))
        before, after = predict(case, result.replaced), predict(case, result.constants)
        b0, b1 = _band(row, None, case.point), _band(row, residuals, case.point)
        rows.append([row.id, f"{before:,.0f}", "-" if b0 is None else f"±{b0:.0f}%", f"{after:,.0f}",
                     "-" if b1 is None else f"±{b1:.0f}%", f"{100 * (after / before - 1):+.1f}%"])
    _table(console, "Recipes: predicted samples/s before and after",
           ("recipe", "before", "band", "after", "band", "change"), rows)


def written(console: Any, path: Any, name: str, recipes: Sequence[Any]) -> None:
    where = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)
    example = f"+recipe={recipes[0].recipe} " if recipes else ""
    console.print(f"Wrote {where}: select it with calibration={name} (python -m ipuexp {example}calibration={name}; "
                  "also for sweeps and python -m ipuexp.plan)", markup=False)

