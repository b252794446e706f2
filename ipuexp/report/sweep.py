"""A sweep read back from MLflow (``report.sweep_load``): one row per configuration, the options that vary, the
throughput-memory front.

Metric names are the ones :mod:`ipuexp.tracking.curated` gives MLflow: ``throughput_samples_per_s``,
``peak_ipu_memory_bytes``, ``ipu_headroom_bytes`` and ``fits``; with the measured figures (``measured_samples_per_s``,
``measured_ipu_memory_bytes``) and the tags ``engine_mode``, ``calibration`` and ``calibration_hash``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from ipuexp.report.option_values import compact
from ipuexp.units import column_unit, human_bytes

THROUGHPUT = "throughput_samples_per_s"
SEQUENCES = "throughput_sequences_per_s"
BAND = "error_band_pct"
FUNCTIONAL_THROUGHPUT = "measured_samples_per_s"
"""Measured throughput: the user's ``measured.samples_per_s``, measured on an IPU system, else a functional run's
on the host (its throughput where the analytic figure is absent)."""
MEASURED = FUNCTIONAL_THROUGHPUT
HOST_THROUGHPUT = "host_samples_per_s"
"""A functional run's host throughput when the user gave an IPU measurement (then ``measured_samples_per_s``)."""
MEASURED_RATIO = "measured_over_predicted"
"""The run's measured / predicted rate: logged by runs that compare with an IPU measurement."""
MEASURED_MEMORY = "measured_ipu_memory_bytes"
SHIPPED = "shipped"
"""The calibration of runs tagged with none (``ipuexp.calibration.user.SHIPPED``)."""
PEAK_MEMORY = "peak_ipu_memory_bytes"
HEADROOM = "ipu_headroom_bytes"
"""Free memory of the fullest IPU: with its peak, the capacity of one IPU."""
NOT_OPTIONS = ("tracking.", "runner.", "hydra.", "engine.cache_dir")
"""Parameters that vary between runs without changing what they compute: never an axis of the report."""


class ReportError(ValueError):
    """Bad input to the report (unknown experiment, nothing to report): one line for the user."""


@dataclass
class Point:
    """One configuration of the sweep (its latest FINISHED run)."""

    run_id: str
    name: str
    """MLflow run name (the swept values)."""
    params: Dict[str, str]
    """The run's parameters: its key options and swept keys."""
    throughput: Optional[float]
    """Samples per second (analytic, else measured)."""
    peak_memory: Optional[float]
    """Bytes on the fullest IPU of a replica."""
    fits: Optional[bool]
    """Every IPU within its memory; None when the run did not say."""
    start_time: int = 0
    error_band_pct: Optional[float] = None
    """The emulator's error band, +- percent: the bound on predicted / measured - 1 (``calibration.band_ends``),
    when the run logged one."""
    sweep_id: Optional[str] = None
    """The sweep's (multirun's) parent run; None for a run of its own."""
    sequences_per_s: Optional[float] = None
    """Packed sequences: sequences per second (``throughput`` counts packs); None when not packed."""
    measured: Optional[float] = None
    """Measured throughput (``measured_samples_per_s``); an IPU measurement is in the unit of ``rate``. Where it was
    measured: ``measured_on``."""
    measured_memory: Optional[float] = None
    """Measured bytes on the fullest IPU (PopVision), when the user gave them."""
    measured_on: Optional[str] = None
    """``ipu``: a measurement on an IPU system, given by the user; ``host``: a functional run's own, on the host
    CPU."""
    calibration: Optional[str] = None
    """The calibration the prediction used, with its hash: ``mine (3f2a9c1e)``; None when the run did not say."""
    calibration_name: str = SHIPPED
    """The calibration's name alone (``--calibration`` selects by it): ``shipped`` when the run did not say."""

    @property
    def rate(self) -> Optional[float]:
        """What points are compared by: sequences per second for a packed run, else its throughput (an unpacked
        sample is one sequence)."""
        return self.sequences_per_s if self.sequences_per_s is not None else self.throughput

    @property
    def ipu_measured(self) -> Optional[float]:
        """The measured rate when an IPU system measured it (a host CPU's rate is no IPU's), else None."""
        return self.measured if self.measured_on == "ipu" else None

    @property
    def measured_ratio(self) -> Optional[float]:
        """Measured / predicted rate of an IPU measurement, from the figures the report shows."""
        if self.ipu_measured is None or not self.rate:
            return None
        return self.ipu_measured / self.rate


@dataclass
class Sweep:
    """The points of an experiment (or of one sweep in it) and the options that vary between them."""

    experiment: str
    points: List[Point]
    options: List[str] = field(default_factory=list)
    """The swept keys (``swept_options``), in the config's order."""
    capacity: Optional[float] = None
    """Memory of one IPU in bytes, when the runs recorded it."""


def swept_options(points: List[Point]) -> List[str]:
    """Keys that vary within a sweep: set in two or more runs of one sweep, with two or more values there.

    A run of its own is no sweep: the overrides it was given (``model.hf.ipu_config=PATH``) are its parameters, but
    they vary nothing. A key only one run of a sweep has, or one value across a sweep, is not swept either."""
    keys: List[str] = []
    for p in points:
        keys += [k for k in p.params if k not in keys and not k.startswith(NOT_OPTIONS)]
    sweeps: Dict[str, List[Point]] = {}
    for p in points:
        if p.sweep_id is not None:
            sweeps.setdefault(p.sweep_id, []).append(p)

    def varies(key: str, runs: List[Point]) -> bool:
        values = [p.params[key] for p in runs if key in p.params]
        return len(values) > 1 and len(set(values)) > 1

    return [k for k in keys if any(varies(k, runs) for runs in sweeps.values())]


def comparable(sweep: Sweep) -> List[Sweep]:
    """``sweep`` split into sets of runs that compare: one model (a zoo model and a Transformers model of the same
    keys are not the same model) and one unit (packed runs count sequences, and their samples are packs). One set
    is ``sweep`` itself; each other set is named by what sets it apart (``bert_large``, ``hf:bert-large-uncased``,
    ``bert_large, packed``)."""
    groups: Dict[Any, List[Point]] = {}
    for p in sweep.points:
        groups.setdefault((p.params.get("model", "?"), p.sequences_per_s is not None), []).append(p)
    if len(groups) == 1:
        return [sweep]
    return [Sweep(experiment=f"{sweep.experiment} [{model}{', packed' if packed else ''}]", points=points,
                  options=swept_options(points), capacity=sweep.capacity)
            for (model, packed), points in groups.items()]


def sweep_numbers(points: List[Point]) -> Dict[str, str]:
    """Run id -> which sweep it is a point of (``1``, ``2``... in order of the sweeps' first runs) or ``-`` for a run
    of its own; empty when every point is of one sweep."""
    order: List[Optional[str]] = list(dict.fromkeys(p.sweep_id for p in points))
    if len(order) <= 1:
        return {}
    numbers = {sid: str(n) for n, sid in enumerate([s for s in order if s is not None], 1)}
    return {p.run_id: "-" if p.sweep_id is None else numbers[p.sweep_id] for p in points}


def pareto_front(points: List[Point]) -> List[Point]:
    """Points that fit and that no other fitting point beats on both throughput (higher) and peak memory (lower),
    by increasing memory."""
    candidates = [p for p in points if p.fits is not False and p.rate is not None and p.peak_memory is not None]
    front: List[Point] = []
    for p in sorted(candidates, key=lambda p: (p.peak_memory, -p.rate)):
        if not front or p.rate > front[-1].rate:
            front.append(p)
    return front


def pareto_numbers(points: List[Point]) -> Dict[str, int]:
    """The Pareto points' numbers by run id, 1 for the least memory: the table and ``pareto.png`` share them."""
    return {p.run_id: n for n, p in enumerate(pareto_front(points), 1)}


def as_number(value: Optional[str]) -> Optional[float]:
    """A parameter value as a number (an int when it is one), or None when it is not a number."""
    if value is None:
        return None
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return None


def table(sweep: Sweep) -> Any:
    """The sweep as a pandas DataFrame: swept options, fits, throughput, peak memory, what was measured and the
    calibration; fastest first."""
    import pandas as pd

    front = {p.run_id for p in pareto_front(sweep.points)}
    sweeps = sweep_numbers(sweep.points)
    rows = []
    for p in sweep.points:
        row: Dict[str, Any] = {"run": p.name, **({"sweep": sweeps[p.run_id]} if sweeps else {})}
        for k in sweep.options:
            v = p.params.get(k)
            n = as_number(v)
            numeric = all(as_number(q.params[k]) is not None for q in sweep.points if k in q.params)
            row[k] = n if n is not None and numeric else v
        row.update({"fits": p.fits, "samples_per_s": p.throughput, "sequences_per_s": p.sequences_per_s,
                    "error_band_pct": p.error_band_pct,
                    "peak_ipu_memory_bytes": p.peak_memory,
                    "pareto": p.run_id in front, "measured_samples_per_s": p.measured, "measured_on": p.measured_on,
                    "measured_over_predicted": p.measured_ratio, "measured_ipu_memory_bytes": p.measured_memory,
                    "calibration": p.calibration or p.calibration_name, "run_id": p.run_id})
        rows.append(row)
    df = pd.DataFrame(rows)
    rate = df["sequences_per_s"].fillna(df["samples_per_s"])  # packed runs compare by their sequences
    return df.loc[rate.sort_values(ascending=False, na_position="last", kind="stable").index].reset_index(drop=True)


def write_csv(sweep: Sweep, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    table(sweep).to_csv(path, index=False)
    return path


def print_table(sweep: Sweep, console: Any = None) -> None:
    """The table on the console within the terminal's width (:mod:`ipuexp.terminal_table`), the Pareto points
    numbered as in ``pareto.png``. Figures keep their full width; swept values that are text fold; a swept key of
    several words may shrink to its initials (a legend spells them out) rather than turn the table into records."""
    import pandas as pd
    from rich.text import Text

    from ipuexp.terminal_table import Column, Table, terminal_console

    console = console or terminal_console()
    df = table(sweep)
    numbers = pareto_numbers(sweep.points)
    short = [k.rsplit(".", 1)[-1] for k in sweep.options]
    if len(set(short)) < len(short):
        short = list(sweep.options)
    names = [] if sweep.options else ["run"]  # nothing swept: the run names (their overrides) tell rows apart
    if "sweep" in df:  # points of several sweeps, or runs of their own ("-") beside a sweep's
        names = ["sweep", *names]
    bands = {b for b in df["error_band_pct"] if not pd.isna(b)}
    one_band = len(bands) == 1 and df["error_band_pct"].notna().all()
    unit = column_unit(df["peak_ipu_memory_bytes"].dropna(), largest="MiB")
    packed = bool(df["sequences_per_s"].notna().any())  # packed runs: their samples are packs
    rows = []
    for _, row in df.iterrows():
        fits = {True: Text("yes"), False: Text("no", style="red")}.get(row["fits"], Text("?"))
        tput = "-" if pd.isna(row["samples_per_s"]) else f"{row['samples_per_s']:,.1f}"
        if not one_band and not pd.isna(row["samples_per_s"]) and not pd.isna(row["error_band_pct"]):
            tput += f" (+-{row['error_band_pct']:.0f}%)"
        mem = "-" if pd.isna(row["peak_ipu_memory_bytes"]) else human_bytes(row["peak_ipu_memory_bytes"], 1, unit)
        pareto = str(numbers.get(row["run_id"], ""))
        seqs = ["-" if pd.isna(row["sequences_per_s"]) else f"{row['sequences_per_s']:,.1f}"] if packed else []
        rows.append([row[n] for n in names] + [_fmt(row[k]) for k in sweep.options]
                    + [fits, tput, *seqs, mem, pareto])
    rate = "packs/s" if packed and df["sequences_per_s"].notna().all() else "samples/s"  # a packed sample is a pack
    samples = f"{rate} (+-{bands.pop():.0f}%)" if one_band else rate
    # A swept value is right-aligned as the figures are; a list or a name folds after its separators.
    headers = [h.replace("_", " ") for h in [*names, *short]]
    initials = [_abbreviation(h) if len(h.split()) > 1 else None for h in headers]
    swept = [Column(h, figure=all(_single_figure(str(r[n])) for r in rows), align="right",
                    abbreviation=a if initials.count(a) == 1 and a not in headers else None)
             for n, (h, a) in enumerate(zip(headers, initials))]
    columns = swept + [Column("fits", figure=False, align="right"), Column(samples, figure=True),
                       *([Column("sequences/s", figure=True)] if packed else []),
                       Column("peak IPU memory", figure=True), Column("Pareto", figure=True)]
    Table(columns, rows, title=f"{sweep.experiment}: {len(df)} configuration{'s' if len(df) != 1 else ''}, swept: "
                               f"{', '.join(sweep.options) or 'nothing'}").print(console)
    if "sweep" in df and (df["sweep"] == "-").any():
        from ipuexp.terminal_table import wrap

        own = [r for r in df.itertuples() if r.sweep == "-"]
        console.print(wrap("sweep -: a run of its own, not a point of a sweep (its overrides: "
                           + "; ".join(r.run for r in own) + ")", console.width), markup=False, highlight=False,
                      soft_wrap=True)


def _abbreviation(header: str) -> str:
    """Initials, as the options are called in Graphcore's guides: GA, AMP, MBS."""
    return "".join(w[0] for w in header.split()).upper()


def _single_figure(value: str) -> bool:
    """A swept value that is one number (``2048``, ``0.25``) or missing: a figure, never folded; a list or a name
    is text."""
    from ipuexp.terminal_table import is_figure

    return value == "-" or (len(value.split()) == 1 and bool(is_figure(value)))


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return compact(value) if isinstance(value, str) else str(value)
