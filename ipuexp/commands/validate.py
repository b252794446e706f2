"""``python -m ipuexp.validate``: predicted vs published throughput for every calibration row.

Each row of the calibration table shipped with ipuexp (``ipuexp/calibration``) is run through its configuration
(``ipuexp/calibration/runs/<id>.yaml``) and the analytic engine. The command prints predicted and published samples
per second, the error in percent, the leave-one-out prediction (constants refitted without the row), the mean absolute
percentage error and whether each gate of ``ipuexp/calibration/validate.yaml`` passes. It is a report and exits 0;
``--check`` (the tests, CI) exits 1 when a gate fails.

``--fit`` refits the constants named in ``fit.FITTED`` (least squares on the log error, ``scipy.optimize``)
and prints the ``calibration:`` block for every generation; ``--write`` also puts it into ``conf/ipu/<gen>.yaml``.

The fit and the held-out refits are in ``fit.py``, the per-row outcomes and their statistics in
``validate_report.py``, the calibration blocks and the plot in ``validate_notes.py``; this module is the command.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from ipuexp.calibration import CALIBRATION_DIR, HF_EXTRA, load_rows, needs_extra, unpredicted
from ipuexp.fitting.fit import FITTED, MODES, fit, held_out_modes, predict, prepare, rounded
from ipuexp.commands.validate_config import ValidateConfig, load_config
from ipuexp.commands.validate_notes import calibration_block, plot, priors, write_block
from ipuexp.fitting.validate_report import Outcome, Report
from ipuexp.exit_status import EXIT_BAD_INPUT, fail

GENERATIONS = ("mk1", "mk2", "bow")


def residual_rows(report: Report) -> List[Any]:
    from ipuexp.calibration.evidence import residual_of

    return [residual_of(o.row, o.loo_error, o.point, fitted=not o.unexplained,
                        lofo_error_pct=o.mode_error("leave-one-family-out")) for o in report.outcomes
            if o.loo_error is not None]


def run(cfg: ValidateConfig, refit: bool = False, complete: bool = False) -> Report:
    """``complete``: every row must run (the gates of ``--check``, the constants of ``--fit``), so rows that need
    the hf extra are an error rather than reported as not run."""
    from ipuexp.calibration.band import error_band

    rows = load_rows(Path(cfg.csv).expanduser().resolve() if cfg.csv else None)
    unknown = sorted(set(cfg.exclude) - {r.id for r in rows})
    if unknown:
        raise ValueError(f"exclude={unknown[0]!r} is not a calibration row; rows: {', '.join(r.id for r in rows)}")
    rows = [r for r in rows if r.id not in cfg.exclude]
    skipped = unpredicted(rows)
    rows = [r for r in rows if r.id not in {row.id for row, _ in skipped}]
    missing = needs_extra(rows)
    if missing and complete:
        raise ValueError(f"{len(missing)} calibration rows are model.name=hf and need the hf extra, which gates and "
                         f"fits need every row of: {HF_EXTRA}")
    rows = [r for r in rows if r not in missing]
    all_cases = prepare(rows, cfg.cache_dir)
    cases = [c for c in all_cases if c.row.id not in cfg.unexplained]
    configured = {n: float(getattr(all_cases[0].plan.rates.calibration, n)) for n in FITTED}
    # Constants fitted with the excluded rows would not answer the what-if: refit without them.
    constants = rounded(fit(cases, configured)) if refit or cfg.exclude else configured
    outcomes = [Outcome(c.row, predict(c, constants), point=c.point) for c in cases]
    outside = [Outcome(c.row, predict(c, constants), point=c.point, unexplained=cfg.unexplained[c.row.id])
               for c in all_cases if c.row.id in cfg.unexplained]
    report = Report(outcomes + outside, constants, unpredicted=skipped, needs_extra=missing)
    for o in outside:  # in no fit: every prediction of it is held out
        o.held_out = {mode: o.predicted for mode in MODES[1:]}
    if cfg.leave_one_out and len(cases) > 1:
        refits = held_out_modes(cases, MODES[1:])
        for mode in MODES[1:]:
            preds, consts = refits[mode]
            report.held_out_constants[mode] = consts
            for i, value in preds.items():
                outcomes[i].held_out[mode] = value
        report.loo_constants = dict(report.held_out_constants["leave-one-out"])
        for o in report.outcomes:
            o.loo = o.held_out.get("leave-one-out")
        # The band of each row's leave-one-out prediction, from the other rows' leave-one-out residuals.
        residuals = residual_rows(report)
        for o in report.outcomes:
            band = error_band(o.row.model, o.row.ipus, o.row.micro_batch, o.row.grad_accum, exclude=o.row.id,
                              residuals=residuals, ipu=o.row.ipu, point=o.point)
            o.band = None if band is None else band.pct
    return report


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:+.1f}"


def print_report(report: Report, cfg: ValidateConfig) -> None:
    from ipuexp.terminal_table import Column, Table, terminal_console

    rows = []
    for o in report.outcomes:
        band = "-" if o.band is None else f"±{o.band:.0f}%" + ("" if o.in_band is None else " ✓" if o.in_band else " ✗")
        rows.append((o.row.id + (" *" if o.unexplained else ""), f"{o.predicted:,.0f}", f"{o.row.published:,.0f}",
                     _pct(o.error), *(_pct(o.mode_error(m)) for m in MODES[1:]), band))
    console = terminal_console(highlight=False)
    # Row names fold; the figures, the band with its ✓ or ✗ included, stay whole (ipuexp.terminal_table).
    Table([Column("row", figure=False), *(Column(h, figure=True) for h in ("pred", "publ", "error", "LOO", "LOFO",
                                                                            "LOSO", "band"))],
          rows, title="Predicted vs published training throughput").print(console)
    console.print("pred, publ: predicted and published samples/s (sequences/s for a packed row); error: in sample, %; LOO, LOFO, LOSO: predicted with the constants refitted without the row, its "
                  "family, its system size, %; band: the LOO error band, ✓ when the published value is inside it; "
                  "*: not fitted (why below)")
    console.print(f"in-sample MAPE {report.mape:.1f}% (threshold {cfg.mape_threshold:g}%), worst row "
                  f"{report.worst:.1f}% (threshold {cfg.max_row_error:g}%)")
    for mode in MODES[1:]:
        if report.mode_mape(mode) is not None:
            console.print(f"{mode}: MAPE {report.mode_mape(mode):.1f}%, worst {report.mode_worst(mode):.1f}%")
    if report.loo_constants:
        console.print(f"published value inside the leave-one-out band: {report.covered_all} of "
                      f"{len(report.outcomes)} rows, {report.covered} of {len(report.fitted)} fitted")
    for o in report.outcomes:
        if o.unexplained:
            console.print(f"not fitted: {o.row.id} ({o.error:+.1f}%): {o.unexplained}")
    for row, why in report.unpredicted:
        console.print(f"not predicted: {row.id} (published {row.published:,.0f}): {why}")
    if report.needs_extra:
        console.print(f"not run: {len(report.needs_extra)} rows are model.name=hf and need the hf extra "
                      f"({HF_EXTRA}): {', '.join(r.id for r in report.needs_extra)}; the gates below judge the "
                      f"other rows", markup=False)
    for name, ok in gates(report, cfg).items():
        console.print(f"gate {'passes' if ok else 'fails'}: {name}")
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
    parser.add_argument("--check", action="store_true", help="exit 1 when a gate of validate.yaml fails (tests, "
                        "CI); without it the command is a report and exits 0")
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
        report = run(cfg, refit=args.fit, complete=args.check or args.fit)
    except (FileNotFoundError, ValueError, KeyError) as err:
        return fail("ipuexp.validate", str(err), EXIT_BAD_INPUT)
    print_report(report, cfg)
    if args.plot:
        plot(report, Path(args.plot))
        print(f"Wrote the predicted-vs-published plot to {args.plot}")
    if args.fit:
        rows = [o.row.id for o in report.fitted]
        for gen in GENERATIONS:
            text = calibration_block(report, gen, _priors(gen), rows)
            print(f"\n# conf/ipu/{gen}.yaml\n{text}")
            if args.write:
                write_block(gen, text)
        if args.write and report.loo_constants:
            from ipuexp.calibration.evidence import write_residuals

            write_residuals(residual_rows(report))
    return exit_code(report, cfg) if args.check else 0


def gates(report: Report, cfg: ValidateConfig) -> Dict[str, bool]:
    """Each acceptance check of the configured thresholds: passed or not (held-out checks only when run)."""
    out = {f"in-sample MAPE <= {cfg.mape_threshold:g}%": report.mape <= cfg.mape_threshold,
           f"in-sample worst <= {cfg.max_row_error:g}%": report.worst <= cfg.max_row_error}
    if report.loo_constants:
        out[f"leave-one-out MAPE <= {cfg.loo_mape_threshold:g}%"] = (report.mode_mape(MODES[1]) or 0.0) <= \
            cfg.loo_mape_threshold
        for mode in MODES[1:]:
            worst = report.mode_worst(mode)
            limit = cfg.loo_worst if mode == MODES[1] else cfg.held_out_worst
            if worst is not None:
                out[f"{mode} worst <= {limit:g}%"] = worst <= limit
        out[f"published outside the LOO band for <= {cfg.max_out_of_band} rows"] = \
            report.out_of_band <= cfg.max_out_of_band
    return out


def exit_code(report: Report, cfg: ValidateConfig) -> int:
    """0 when every gate passes (``gates``), else 1."""
    return 0 if all(gates(report, cfg).values()) else 1


def _priors(generation: str) -> Dict[str, Any]:
    return priors(generation, FITTED)


if __name__ == "__main__":
    sys.exit(main())
