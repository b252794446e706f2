"""``python -m ipuexp.report EXPERIMENT``: a sweep's runs read back from MLflow as a table and charts.

Writes ``sweep.csv``, ``throughput_vs_<option>.png`` for each swept option and ``pareto.png`` (throughput against
peak IPU memory) into ``--out`` and prints the table; when an IPU system measured some runs, the predicted against
measured table and ``predicted_vs_measured.png`` too. Bad input is one line on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import List, Optional

from ipuexp.exit_status import EXIT_BAD_INPUT, EXIT_FAILED, fail

RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What a run id may hold (MLflow's are 32 hex digits); checked before the id goes into a search filter."""


def parse(argv: List[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m ipuexp.report", description=__doc__.split("\n")[0])
    ap.add_argument("experiment", help="MLflow experiment (by default the recipe name)")
    ap.add_argument("--uri", help="tracking URI (default: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here)")
    ap.add_argument("--sweep", default="all",
                    help="all (latest run of every configuration), latest (the newest multirun) or a parent run id")
    ap.add_argument("--calibration", metavar="NAME",
                    help="only the runs predicted under this calibration (shipped: ipuexp's own)")
    ap.add_argument("--out", type=Path, help="output folder (default: sweep_report/EXPERIMENT)")
    return ap.parse_args(argv)


def _say(text: str) -> None:
    """A line of the report, broken between words at the terminal's width."""
    from ipuexp.terminal_table import wrap

    print(wrap(text))


def _folder(name: str) -> str:
    """The subfolder of one kind of run: what sets it apart (``experiment [hf:bert-large-uncased]``)."""
    label = name[name.index("[") + 1:-1] if name.endswith("]") and "[" in name else name
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label.replace(", ", "_"))


def main(argv: Optional[List[str]] = None) -> int:
    args = parse(list(sys.argv[1:] if argv is None else argv))
    from ipuexp.report.predicted_vs_measured import (calibration_warning, measured_points, plot_measured, print_measured,
                                        under_calibration)
    from ipuexp.report.sweep import ReportError, comparable, print_table, write_csv
    from ipuexp.report.sweep_load import load
    from ipuexp.report.sweep_plots import draw_all
    from ipuexp.config.checks import check_uri_or_env, check_writable
    from ipuexp.config.errors import ConfigError
    from ipuexp.tracking.probe import check_store
    from ipuexp.tracking.store import absolute_uri, tracking_uri

    out = args.out or Path("sweep_report") / "".join(c if c.isalnum() or c in "-_." else "_" for c in args.experiment)
    try:
        if args.sweep not in ("all", "latest") and not RUN_ID.match(args.sweep):
            raise ConfigError("--sweep", args.sweep, "allowed: all | latest | a sweep's parent run id (letters, "
                                                     "digits, '-', '_'; MLflow's are 32 hex digits)")
        check_uri_or_env("--uri", args.uri)
        check_writable("--out", out)
        uri = absolute_uri(args.uri, Path.cwd()) if args.uri else tracking_uri(None)
        check_store("--uri", args.uri or uri, uri, must_exist=True)
        sweep = load(uri, args.experiment, args.sweep)
        if args.calibration:
            sweep = under_calibration(sweep, args.calibration)
    except (ReportError, ConfigError) as err:
        return fail("ipuexp.report", str(err), EXIT_BAD_INPUT)
    mixed = calibration_warning(sweep)
    if mixed:  # before the tables: every figure below compares predictions
        _say(mixed)
    sets = comparable(sweep)
    if len(sets) > 1:
        _say(f"{len(sets)} kinds of run, each compared within itself (another model, or packed sequences counted "
             f"per sequence, is not the same configuration): "
             + "; ".join(f"{s.experiment[len(sweep.experiment) + 2:-1]} ({len(s.points)} "
                         f"{'run' if len(s.points) == 1 else 'runs'}, in {_folder(s.experiment)}/)" for s in sets))
    try:
        written = []
        for part in sets:
            print_table(part)
            where = out / _folder(part.experiment) if len(sets) > 1 else out
            written += [write_csv(part, where / "sweep.csv"), *draw_all(part, where)]
        if any(p.measured is not None or p.measured_memory is not None for p in sweep.points):
            print_measured(sweep)
            if any(p.ipu_measured is not None for p in measured_points(sweep)):
                written.append(plot_measured(sweep, out / "predicted_vs_measured.png"))
    except OSError as err:  # a disk that filled up, a folder removed meanwhile
        return fail("ipuexp.report", f"--out={str(out)!r}: writing failed ({err.strerror or err})", EXIT_FAILED)
    import os

    names = [str(Path(p).relative_to(out)) for p in written]
    _say(f"Wrote {', '.join(dict.fromkeys(names))} to {out}{os.sep}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
