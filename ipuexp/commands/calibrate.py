"""``python -m ipuexp.calibrate FILE.csv --name NAME``: refit the calibration on runs you measured.

Reads measured runs (a CSV with ``id``, ``overrides``, ``measured_samples_per_s`` and optionally
``measured_ipu_memory_bytes``; or ``--from-mlflow EXPERIMENT``), predicts each, refits the fitted constants on the
shipped calibration rows and the measured runs (``--measured-only``: on the measured runs alone), and prints every
row's prediction before and after, the constants' shifts with their leave-one-out ranges and the new error bands.
It writes ``./calibration/NAME.yaml`` (or ``$IPUEXP_CALIBRATION_DIR``), which ``calibration=NAME`` selects for any
run, sweep or plan. Bad input is one line and exit code 2; a failed fit is one line, exit code 1, and no file.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import shlex
import sys
from pathlib import Path
from typing import Any, List, Optional, Sequence

from ipuexp.exit_status import EXIT_BAD_INPUT, EXIT_FAILED, fail

EXIT_FIT_FAILED = EXIT_FAILED


def parse(argv: List[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m ipuexp.calibrate",
        description="Refit the emulator's fitted constants on runs you measured and write them as NAME.yaml in "
                    "./calibration (or $IPUEXP_CALIBRATION_DIR); calibration=NAME selects them for any run, sweep or "
                    "plan.")
    ap.add_argument("file", nargs="?", type=Path, help="CSV of measured runs: id, overrides, measured_samples_per_s"
                    "[, measured_ipu_memory_bytes]")
    ap.add_argument("--name", required=True, help="the calibration's name: written as NAME.yaml, selected with "
                    "calibration=NAME")
    ap.add_argument("--from-mlflow", metavar="EXPERIMENT", help="read the measured runs from this MLflow "
                    "experiment instead of a file (runs with measured_samples_per_s)")
    ap.add_argument("--uri", help="tracking URI for --from-mlflow (default: MLFLOW_TRACKING_URI, else "
                    "sqlite:///mlflow.db here)")
    ap.add_argument("--measured-only", action="store_true", help="fit on the measured runs alone, not with the "
                    "shipped calibration rows (for a workload unlike Graphcore's published runs)")
    ap.add_argument("--keep-outliers", action="store_true", help="fit a run measured more than 3x from its "
                    "prediction too")
    ap.add_argument("--recipe", action="append", default=[], metavar="NAME",
                    help="also show this recipe's prediction before and after (repeatable)")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing calibration of that name")
    return ap.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    args = parse(raw)
    from ipuexp.calibration.user import ENV, calibration_dir, check_name, path_of
    from ipuexp.config.checks import check_uri_or_env, check_writable
    from ipuexp.fitting.measured_runs import read_csv, read_mlflow

    try:
        check_name(args.name)
        if (args.file is None) == (args.from_mlflow is None):
            raise ValueError("give one source of measured runs: FILE.csv or --from-mlflow EXPERIMENT")
        if args.from_mlflow is not None and not args.from_mlflow.strip():
            raise ValueError(f"--from-mlflow={args.from_mlflow!r} is invalid: allowed: the name of an MLflow "
                             "experiment")
        check_uri_or_env("--uri", args.uri)
        check_writable(ENV, calibration_dir(), " where the calibration is written; unset: ./calibration")
        target = path_of(args.name)
        if target.exists() and not target.is_file():  # not even --overwrite replaces it: refused after the fit
            raise ValueError(f"--name={args.name!r} is invalid: {target} is not a file (a folder in the way); "
                             "allowed: a name whose NAME.yaml is a file, or absent")
        if target.exists() and not args.overwrite:
            raise ValueError(f"--name={args.name!r}: {target} exists; --overwrite replaces it")
        if args.from_mlflow:
            from ipuexp.tracking.probe import check_store
            from ipuexp.tracking.store import absolute_uri, tracking_uri

            uri = absolute_uri(args.uri, Path.cwd()) if args.uri else tracking_uri(None)
            check_store("--uri", args.uri or uri, uri, must_exist=True)
            measurements = read_mlflow(args.from_mlflow, uri)
        else:
            measurements = read_csv(args.file)
        recipes = [_recipe(name) for name in args.recipe]
    except ValueError as err:  # MeasurementError and ConfigError too
        return fail("ipuexp.calibrate", str(err), EXIT_BAD_INPUT)
    return _calibrate(args, measurements, recipes, target, raw)


def _recipe(name: str) -> Any:
    from ipuexp.config.compose import compose_recipe
    from ipuexp.config.errors import ConfigError

    try:
        return compose_recipe(name, ["calibration=null"])
    except ConfigError as err:
        raise ValueError(f"--recipe {name}: {err}") from None


def _calibrate(args: argparse.Namespace, measurements: Sequence[Any], recipes: Sequence[Any], target: Path,
               raw: List[str]) -> int:
    from ipuexp.calibration import HF_EXTRA, load_rows, needs_extra, unpredicted
    from ipuexp.calibration.user import MeasuredRow, NameTaken, UserCalibration, free_name, save
    from ipuexp.fitting.refit import FitFailed, refit
    from ipuexp.commands.validate_config import load_config
    from ipuexp.fitting.fit import FITTED, prepare
    from ipuexp.fitting.measured_runs import prepare as prepare_measured
    from ipuexp.commands import calibrate_print as show
    from ipuexp.terminal_table import terminal_console

    console = terminal_console(highlight=False)
    cfg = load_config()
    rows = load_rows()
    rows = [r for r in rows if r.id not in {row.id for row, _ in unpredicted(rows)}]
    missing = needs_extra(rows)
    if missing:
        console.print(f"left out: {len(missing)} shipped rows are model.name=hf and need the hf extra ({HF_EXTRA}): "
                      f"{', '.join(r.id for r in missing)}", markup=False)
    cases = prepare([r for r in rows if r not in missing], cfg.cache_dir)
    replaced = {n: float(getattr(cases[0].plan.rates.calibration, n)) for n in FITTED}
    mine, left = prepare_measured(measurements, replaced, keep_outliers=args.keep_outliers)
    for m, why in left:
        console.print(f"left out: {m.id} ({m.source}): {why}", markup=False)
    mode = "measured" if args.measured_only else "shipped+measured"
    try:
        result = refit([c for c in cases if c.row.id not in cfg.unexplained],
                       [c for c in cases if c.row.id in cfg.unexplained], mine, replaced, mode)
    except FitFailed as err:
        return fail("ipuexp.calibrate", f"{err}; nothing written", EXIT_FIT_FAILED)
    residuals = result.residuals()
    show.report(console, result, residuals, recipes)
    cal = UserCalibration(
        name=args.name, fitted_on=mode, constants=result.constants, replaced=result.replaced,
        loo_range=result.loo_range(), residuals=residuals,
        rows=[MeasuredRow(line.case.row.id, line.measured.measurement.overrides_text, line.target, _g(line.before),
                          _g(line.after), None if line.loo is None else _g(line.loo), line.case.row.family,
                          line.measured.measurement.ipu_memory_bytes, line.measured.predicted_memory)
              for line in result.mine if line.measured],
        created=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        command="python -m ipuexp.calibrate " + " ".join(shlex.quote(a) for a in raw))
    try:
        path = save(cal, target.parent, overwrite=args.overwrite)
    except NameTaken:
        kept = save(dataclasses.replace(cal, name=free_name(args.name, target.parent)), target.parent, False)
        print(f"ipuexp.calibrate: --name={args.name!r} is invalid: {target} was written by another process during "
              f"this fit; allowed: --overwrite to replace it; this fit is kept as {kept} (calibration={kept.stem})",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as err:
        print(f"ipuexp.calibrate: {target} cannot be written ({err.strerror or err}); nothing written",
              file=sys.stderr)
        return EXIT_FIT_FAILED
    show.written(console, path, args.name, recipes)
    return 0


def _g(value: float) -> float:
    """A prediction to 6 significant digits (the file is read by people too)."""
    return float(f"{value:.6g}")


if __name__ == "__main__":
    sys.exit(main())
