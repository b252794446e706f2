"""A sweep read back from MLflow: one row per configuration, the options that vary, the throughput-memory front.

Metric names are the ones :mod:`ipuexp.tracking.curated` gives MLflow: ``throughput_samples_per_s``,
``peak_ipu_memory_bytes``, ``ipu_headroom_bytes`` and ``fits``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

THROUGHPUT = "throughput_samples_per_s"
BAND = "error_band_pct"
FUNCTIONAL_THROUGHPUT = "measured_samples_per_s"
"""Measured throughput of a functional run, used where the analytic figure is absent."""
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
    """+- percent of the predicted throughput (the emulator's error band), when the run logged one."""


@dataclass
class Sweep:
    """The points of an experiment (or of one sweep in it) and the options that vary between them."""

    experiment: str
    points: List[Point]
    options: List[str] = field(default_factory=list)
    """Parameter keys with more than one value among the points, in the config's order."""
    capacity: Optional[float] = None
    """Memory of one IPU in bytes, when the runs recorded it."""


def load(uri: str, experiment: str, sweep: str = "all") -> Sweep:
    """Read FINISHED job runs of ``experiment``: ``sweep`` is ``all`` (latest run per config hash), ``latest``
    (the newest sweep's children) or a parent run id."""
    from ipuexp.tracking.store import client, retry
    from ipuexp.tracking.sweep import PARENT_TAG, SWEEP_KEY_TAG

    c = client(uri)
    exp = retry(c.get_experiment_by_name, experiment)
    if exp is None:
        known = ", ".join(sorted(e.name for e in retry(c.search_experiments))) or "none"
        raise ReportError(f"experiment={experiment!r} not found in {uri}; known experiments: {known}")
    filters = ["attributes.status = 'FINISHED'"]
    if sweep != "all":
        parent = sweep
        if sweep == "latest":
            parents = retry(c.search_runs, [exp.experiment_id], filter_string=f"tags.{SWEEP_KEY_TAG} LIKE '%'",
                            max_results=1, order_by=["attributes.start_time DESC"])
            if not parents:
                raise ReportError(f"sweep=latest: experiment {experiment!r} has no sweep (multirun) runs")
            parent = parents[0].info.run_id
        filters.append(f"tags.`{PARENT_TAG}` = '{parent}'")
    runs = _search_all(c, exp.experiment_id, " and ".join(filters))
    latest: Dict[str, Any] = {}
    for run in sorted(runs, key=lambda r: r.info.start_time):
        key = run.data.tags.get("config_hash")
        if key is not None:  # job runs only (sweep parents carry no config hash)
            latest[key] = run
    if not latest:
        raise ReportError(f"experiment={experiment!r}, sweep={sweep!r}: no FINISHED job runs to report")
    points = [_point(r) for r in sorted(latest.values(), key=lambda r: r.info.start_time)]
    capacities = [r.data.metrics[PEAK_MEMORY] + r.data.metrics[HEADROOM] for r in latest.values()
                  if PEAK_MEMORY in r.data.metrics and HEADROOM in r.data.metrics]
    return Sweep(experiment=experiment, points=points, options=varying_options(points),
                 capacity=max(capacities) if capacities else None)


def _search_all(c: Any, experiment_id: str, filter_string: str) -> List[Any]:
    from ipuexp.tracking.store import retry

    runs, token = [], None
    while True:
        page = retry(c.search_runs, [experiment_id], filter_string=filter_string, max_results=1000,
                     page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _point(run: Any) -> Point:
    m = run.data.metrics
    throughput = m.get(THROUGHPUT, m.get(FUNCTIONAL_THROUGHPUT))
    fits: Optional[bool] = None
    if "fits" in m:
        fits = m["fits"] > 0.5
    elif run.data.tags.get("fits") in ("true", "false"):
        fits = run.data.tags["fits"] == "true"
    return Point(run_id=run.info.run_id, name=run.info.run_name or run.info.run_id[:8], params=dict(run.data.params),
                 throughput=throughput, peak_memory=m.get(PEAK_MEMORY), fits=fits,
                 start_time=run.info.start_time, error_band_pct=m.get(BAND))


def varying_options(points: List[Point]) -> List[str]:
    """Parameters that take more than one value among ``points`` (the swept options)."""
    keys: List[str] = []
    for p in points:
        keys += [k for k in p.params if k not in keys]
    return [k for k in keys if not k.startswith(NOT_OPTIONS)
            and len({p.params.get(k) for p in points}) > 1]


def pareto_front(points: List[Point]) -> List[Point]:
    """Points that fit and that no other fitting point beats on both throughput (higher) and peak memory (lower),
    by increasing memory."""
    candidates = [p for p in points if p.fits is not False and p.throughput is not None
                  and p.peak_memory is not None]
    front: List[Point] = []
    for p in sorted(candidates, key=lambda p: (p.peak_memory, -p.throughput)):
        if not front or p.throughput > front[-1].throughput:
            front.append(p)
    return front


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
    """The sweep as a pandas DataFrame: swept options, fits, throughput, peak memory; fastest first."""
    import pandas as pd

    front = {p.run_id for p in pareto_front(sweep.points)}
    rows = []
    for p in sweep.points:
        row: Dict[str, Any] = {"run": p.name}
        for k in sweep.options:
            v = p.params.get(k)
            n = as_number(v)
            row[k] = n if n is not None and all(as_number(q.params.get(k)) is not None for q in sweep.points) else v
        row.update({"fits": p.fits, "samples_per_s": p.throughput, "error_band_pct": p.error_band_pct,
                    "peak_ipu_memory_bytes": p.peak_memory,
                    "pareto": p.run_id in front, "run_id": p.run_id})
        rows.append(row)
    df = pd.DataFrame(rows)
    return df.sort_values("samples_per_s", ascending=False, na_position="last", kind="stable").reset_index(drop=True)


def write_csv(sweep: Sweep, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    table(sweep).to_csv(path, index=False)
    return path


def print_table(sweep: Sweep, console: Any = None) -> None:
    """The table on the console (rich), with the Pareto points marked."""
    import pandas as pd
    from rich.console import Console
    from rich.table import Table

    df = table(sweep)
    t = Table(title=f"{sweep.experiment}: {len(df)} configurations, swept: {', '.join(sweep.options) or 'nothing'}")
    short = [k.rsplit(".", 1)[-1] for k in sweep.options]
    if len(set(short)) < len(short):
        short = list(sweep.options)
    for col in [*short, "fits", "samples/s", "peak IPU memory", "Pareto"]:
        t.add_column(col, justify="right")
    for _, row in df.iterrows():
        fits = {True: "yes", False: "[red]no[/red]"}.get(row["fits"], "?")
        tput = "-" if pd.isna(row["samples_per_s"]) else f"{row['samples_per_s']:,.1f}"
        if not pd.isna(row["samples_per_s"]) and not pd.isna(row["error_band_pct"]):
            tput += f" (+-{row['error_band_pct']:.0f}%)"
        mem = "-" if pd.isna(row["peak_ipu_memory_bytes"]) else f"{row['peak_ipu_memory_bytes'] / 1e6:,.1f} MB"
        t.add_row(*[_fmt(row[k]) for k in sweep.options], fits, tput, mem, "*" if row["pareto"] else "")
    (console or Console()).print(t)


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
