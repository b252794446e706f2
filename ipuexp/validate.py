"""``python -m ipuexp.validate``: predicted vs published throughput for every calibration row.

Each row of the calibration table shipped with ipuexp (``ipuexp/calibration``) is run through its configuration
(``ipuexp/calibration/runs/<id>.yaml``) and the analytic engine. The command prints predicted and published samples per second, the error in percent,
the leave-one-out prediction (constants refitted without the row), the mean absolute percentage error, and exits
1 when the MAPE or the worst row exceeds the thresholds in ``ipuexp/calibration/validate.yaml``.

``--fit`` refits the constants named in ``FITTED`` (least squares on the log error, ``scipy.optimize``) and prints
the ``calibration:`` block for every generation; ``--write`` also puts it into ``conf/ipu/<gen>.yaml``.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from ipuexp.calibration import CALIBRATION_DIR, Row, compose_run, load_rows
from ipuexp.validate_notes import calibration_block, plot, priors, write_block

if TYPE_CHECKING:
    from ipuexp.graph.types import Graph
    from ipuexp.execution.execution import ExecutionPlan

FITTED: Dict[str, Tuple[float, float]] = {
    "amp_efficiency": (0.05, 1.0),
    "vector_efficiency": (0.02, 1.0),
    "compute_set_cycles": (1.0, 5000.0),
    "gw_step_latency_s": (1e-6, 1e-4),
}
"""Constants fitted to the calibration rows, with the physical range each may take (at most 5: hardware-level,
shared by Mk2 and Bow)."""

PRIORS: Dict[str, float] = {
    "amp_efficiency": 0.8,
    "vector_efficiency": 0.3,
    "compute_set_cycles": 1000.0,
    "gw_step_latency_s": 5e-6,
}
"""Where every fit is drawn to (weakly, ``PRIOR_WEIGHT``) and where every held-out fit starts: a constant the
remaining rows cannot determine (the GW-Link step when no multi-rack row is left) stays near this value, and no
held-out fit inherits the in-sample one. amp_efficiency:
most of the AMP peak; vector_efficiency: PopLibs element-wise vertices reach about 1/4 of the load path at best
(Jia et al. 2019 on compiler-generated loops), of which a share; compute_set_cycles: a global sync and a
6-worker launch are about 600 + 300 cycles; gw_step_latency_s: one 100 GbE RoCE hop and a cross-rack sync, a few
microseconds."""

MODES = ("in-sample", "leave-one-out", "leave-one-family-out", "leave-one-size-out")
"""How each row is predicted: with constants fitted on all rows, on all but the row, on all rows but the row's
model family (BERT, ResNet, ViT), on all rows but the row's system size (POD16, POD128, POD256)."""

GENERATIONS = ("mk1", "mk2", "bow")

PRIOR_WEIGHT = 0.05
"""Weight of each constant's log distance from its prior, in the units of a row's log error: a factor 2 away
from the prior costs what a 3.5% row error costs, so the rows decide wherever they can, and a direction they
cannot determine (a family left out) stays near the prior instead of running to a bound."""

ROBUST_SCALE = 0.05
"""Log error (about 5%) beyond which a row's residual counts linearly, not quadratically, in the fit."""


@dataclass
class ValidateConfig:
    """Settings of the validation command (``ipuexp/calibration/validate.yaml``)."""

    csv: Optional[str] = None
    """Calibration table (default: the one shipped with ipuexp); a relative path is taken from the current
    directory."""
    mape_threshold: float = 10.0
    """Exit 1 when the mean absolute percentage error exceeds this (percent)."""
    max_row_error: float = 20.0
    """Exit 1 when any row's absolute error exceeds this (percent)."""
    leave_one_out: bool = True
    """Also refit without each row, each family and each system size, and predict what was left out."""
    exclude: List[str] = field(default_factory=list)
    """Row ids left out of the table altogether (a what-if study: the fit and every statistic without them)."""
    loo_mape_threshold: float = 8.0
    """Exit 1 when the leave-one-out MAPE exceeds this (percent)."""
    held_out_worst: float = 15.0
    """Exit 1 when any row's leave-one-out, -family-out or -size-out error exceeds this (percent)."""
    min_in_band: int = 7
    """Exit 1 when fewer rows have their published value inside their leave-one-out band."""
    cache_dir: Optional[str] = None
    """Graph capture cache (default: the engine's)."""


@dataclass(frozen=True)
class Case:
    """A calibration row ready to evaluate: its execution plan and captured graph."""

    row: Row
    plan: ExecutionPlan
    graph: Graph


@dataclass
class Outcome:
    row: Row
    predicted: float
    loo: Optional[float] = None
    held_out: Dict[str, float] = field(default_factory=dict)
    """Prediction of the row per held-out mode (leave-one-out, -family-out, -size-out)."""
    band: Optional[float] = None
    """Error band (percent) of the row's leave-one-out prediction, from the other rows' residuals."""

    @property
    def error(self) -> float:
        return 100.0 * (self.predicted / self.row.published - 1.0)

    @property
    def loo_error(self) -> Optional[float]:
        return None if self.loo is None else 100.0 * (self.loo / self.row.published - 1.0)

    def mode_error(self, mode: str) -> Optional[float]:
        if mode == "in-sample":
            return self.error
        value = self.held_out.get(mode)
        return None if value is None else 100.0 * (value / self.row.published - 1.0)

    @property
    def in_band(self) -> Optional[bool]:
        err = self.loo_error
        return None if err is None or self.band is None else abs(err) <= self.band


@dataclass
class Report:
    outcomes: List[Outcome]
    constants: Dict[str, float]
    loo_constants: Dict[str, Dict[str, float]] = field(default_factory=dict)
    held_out_constants: Dict[str, Dict[str, Dict[str, float]]] = field(default_factory=dict)
    """mode -> left-out group -> constants."""

    @property
    def mape(self) -> float:
        return sum(abs(o.error) for o in self.outcomes) / len(self.outcomes)

    @property
    def worst(self) -> float:
        return max(abs(o.error) for o in self.outcomes)

    @property
    def loo_mape(self) -> Optional[float]:
        errs = [o.loo_error for o in self.outcomes if o.loo_error is not None]
        return sum(abs(e) for e in errs) / len(errs) if errs else None

    def mode_errors(self, mode: str) -> List[float]:
        return [e for e in (o.mode_error(mode) for o in self.outcomes) if e is not None]

    def mode_mape(self, mode: str) -> Optional[float]:
        errs = self.mode_errors(mode)
        return sum(abs(e) for e in errs) / len(errs) if errs else None

    def mode_worst(self, mode: str) -> Optional[float]:
        errs = self.mode_errors(mode)
        return max(abs(e) for e in errs) if errs else None

    @property
    def covered(self) -> int:
        """Rows whose published value lies inside the band of their leave-one-out prediction."""
        return sum(1 for o in self.outcomes if o.in_band)

    def constant_range(self, name: str) -> Optional[Tuple[float, float]]:
        values = [c[name] for c in self.loo_constants.values() if name in c]
        return (min(values), max(values)) if values else None


def load_config(path: Optional[Path] = None) -> ValidateConfig:
    from omegaconf import OmegaConf

    base = OmegaConf.structured(ValidateConfig)
    path = path or CALIBRATION_DIR / "validate.yaml"
    if path.exists():
        base = OmegaConf.merge(base, OmegaConf.load(path))
    return OmegaConf.to_object(base)


def prepare(rows: Sequence[Row], cache_dir: Optional[str] = None) -> List[Case]:
    from ipuexp.graph.capture import capture
    from ipuexp.execution.execution import plan_for

    cases = []
    for row in rows:
        exp = compose_run(row.id)
        graph = capture(exp.model, exp.data.micro_batch_size, cache_dir=cache_dir or exp.engine.cache_dir)
        cases.append(Case(row, plan_for(exp, graph), graph))
    return cases


def predict(case: Case, constants: Optional[Dict[str, float]] = None) -> float:
    """Samples per second of a case, with ``constants`` replacing the configured calibration values (the case
    itself is not changed)."""
    from ipuexp.emulator.timing import estimate_throughput

    plan = case.plan.with_calibration(constants) if constants else case.plan
    return estimate_throughput(plan, case.graph).samples_per_s


def fit(cases: Sequence[Case], start: Dict[str, float]) -> Dict[str, float]:
    """Robust least squares on log(predicted / published) over ``cases`` for the FITTED constants
    (log-parameterised, within their physical ranges), each drawn weakly towards its prior (``PRIOR_WEIGHT``).
    Constants measured in cycles are shared by every generation in ``cases``."""
    import numpy as np
    from scipy.optimize import least_squares

    names = list(FITTED)
    lo = np.log([FITTED[n][0] for n in names])
    hi = np.log([FITTED[n][1] for n in names])
    x0 = np.clip(np.log([start[n] for n in names]), lo + 1e-9, hi - 1e-9)

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


def _rounded(constants: Dict[str, float]) -> Dict[str, float]:
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
        fitted = _rounded(fit(others, PRIORS))
        consts[name] = fitted
        for i in idx:
            preds[i] = predict(cases[i], fitted)
    return preds, consts


def residual_rows(report: Report) -> List[Any]:
    from ipuexp.calibration.band import Residual

    return [Residual(o.row.id, o.row.family, o.row.ipu, o.row.ipus, o.row.micro_batch, o.row.grad_accum,
                     o.loo_error) for o in report.outcomes if o.loo_error is not None]


def run(cfg: ValidateConfig, refit: bool = False) -> Report:
    from ipuexp.calibration.band import error_band

    rows = load_rows(Path(cfg.csv).expanduser().resolve() if cfg.csv else None)
    unknown = sorted(set(cfg.exclude) - {r.id for r in rows})
    if unknown:
        raise ValueError(f"exclude={unknown[0]!r} is not a calibration row; rows: {', '.join(r.id for r in rows)}")
    rows = [r for r in rows if r.id not in cfg.exclude]
    cases = prepare(rows, cfg.cache_dir)
    configured = {n: float(getattr(cases[0].plan.rates.calibration, n)) for n in FITTED}
    # Constants fitted with the excluded rows would not answer the what-if: refit without them.
    constants = _rounded(fit(cases, configured)) if refit or cfg.exclude else configured
    outcomes = [Outcome(c.row, predict(c, constants)) for c in cases]
    report = Report(outcomes, constants)
    if cfg.leave_one_out and len(cases) > 1:
        for mode in MODES[1:]:
            preds, consts = held_out(cases, mode)
            report.held_out_constants[mode] = consts
            for i, value in preds.items():
                outcomes[i].held_out[mode] = value
        report.loo_constants = dict(report.held_out_constants["leave-one-out"])
        for o in outcomes:
            o.loo = o.held_out.get("leave-one-out")
        # The band of each row's leave-one-out prediction, from the other rows' leave-one-out residuals.
        residuals = residual_rows(report)
        for o in outcomes:
            band = error_band(o.row.model, o.row.ipus, o.row.micro_batch, o.row.grad_accum, exclude=o.row.id,
                              residuals=residuals, ipu=o.row.ipu)
            o.band = None if band is None else band.pct
    return report


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:+.1f}"


def print_report(report: Report, cfg: ValidateConfig) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Predicted vs published training throughput (samples/s); errors in percent")
    for col in ("row", "IPU", "predicted", "published", "in-sample", "LOO", "LOFO", "LOSO", "LOO band", "in band"):
        table.add_column(col, justify="left" if col == "row" else "right", no_wrap=True)
    for o in report.outcomes:
        table.add_row(o.row.id, o.row.ipu, f"{o.predicted:,.0f}", f"{o.row.published:,.0f}", _pct(o.error),
                      *(_pct(o.mode_error(m)) for m in MODES[1:]),
                      "-" if o.band is None else f"+-{o.band:.0f}%",
                      "-" if o.in_band is None else ("yes" if o.in_band else "no"))
    console = Console(width=max(Console().width, 140))
    console.print(table)
    console.print(f"in-sample MAPE {report.mape:.1f}% (threshold {cfg.mape_threshold:g}%), worst row "
                  f"{report.worst:.1f}% (threshold {cfg.max_row_error:g}%)")
    for mode in MODES[1:]:
        if report.mode_mape(mode) is not None:
            console.print(f"{mode}: MAPE {report.mode_mape(mode):.1f}%, worst {report.mode_worst(mode):.1f}%")
    if report.loo_constants:
        console.print(f"published value inside the leave-one-out band: {report.covered} of {len(report.outcomes)}")
    for name, ok in gates(report, cfg).items():
        console.print(f"{'pass' if ok else 'FAIL'}: {name}")
    consts = []
    for k, v in report.constants.items():
        rng = report.constant_range(k)
        consts.append(f"{k}={v:g}" + (f" (LOO {rng[0]:g}..{rng[1]:g})" if rng else ""))
    console.print("constants: " + ", ".join(consts))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ipuexp.validate", description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="refit the constants to the calibration rows")
    parser.add_argument("--write", action="store_true", help="with --fit: write the calibration blocks")
    parser.add_argument("--no-loo", action="store_true", help="skip the leave-one-out refits")
    parser.add_argument("--csv", help="calibration table (default: conf/validate.yaml csv)")
    parser.add_argument("--plot", help="save a predicted-vs-published plot (in sample and held out) to this PNG")
    parser.add_argument("--exclude", action="append", default=[], metavar="ROW",
                        help="leave this calibration row out of the fit and the statistics (repeatable; not with "
                             "--write)")
    args = parser.parse_args(argv)
    if args.exclude and args.write:
        print("ipuexp.validate: --exclude with --write would ship constants fitted without rows of the table; "
              "drop one of them", file=sys.stderr)
        return 2
    cfg = load_config()
    if args.csv:
        cfg.csv = args.csv
    cfg.exclude = list(cfg.exclude) + args.exclude
    if args.no_loo:
        cfg.leave_one_out = False
    try:
        report = run(cfg, refit=args.fit)
    except (FileNotFoundError, ValueError, KeyError) as err:
        print(f"ipuexp.validate: {err}", file=sys.stderr)
        return 2
    print_report(report, cfg)
    if args.plot:
        plot(report, Path(args.plot))
    if args.fit:
        rows = [o.row.id for o in report.outcomes]
        for gen in GENERATIONS:
            text = calibration_block(report, gen, _priors(gen), rows)
            print(f"\n# conf/ipu/{gen}.yaml\n{text}")
            if args.write:
                write_block(gen, text)
        if args.write and report.loo_constants:
            from ipuexp.calibration.band import write_residuals

            write_residuals(residual_rows(report))
    return exit_code(report, cfg)


def gates(report: Report, cfg: ValidateConfig) -> Dict[str, bool]:
    """Each acceptance check of the configured thresholds: passed or not (held-out checks only when run)."""
    out = {f"in-sample MAPE <= {cfg.mape_threshold:g}%": report.mape <= cfg.mape_threshold,
           f"in-sample worst <= {cfg.max_row_error:g}%": report.worst <= cfg.max_row_error}
    if report.loo_constants:
        out[f"leave-one-out MAPE <= {cfg.loo_mape_threshold:g}%"] = (report.mode_mape(MODES[1]) or 0.0) <= \
            cfg.loo_mape_threshold
        for mode in MODES[1:]:
            worst = report.mode_worst(mode)
            if worst is not None:
                out[f"{mode} worst <= {cfg.held_out_worst:g}%"] = worst <= cfg.held_out_worst
        out[f"published inside the LOO band for >= {cfg.min_in_band} rows"] = report.covered >= min(
            cfg.min_in_band, len(report.outcomes))
    return out


def exit_code(report: Report, cfg: ValidateConfig) -> int:
    """0 when every gate passes (``gates``), else 1."""
    return 0 if all(gates(report, cfg).values()) else 1


def _priors(generation: str) -> Dict[str, Any]:
    return priors(generation, FITTED)


if __name__ == "__main__":
    sys.exit(main())
