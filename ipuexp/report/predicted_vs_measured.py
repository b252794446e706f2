"""Predicted against measured: the runs an IPU system measured, the prediction's error against each and its band
(``ipuexp.calibration.band_ends``: a band bounds ``predicted / measured - 1``).

A functional run's own measurement is the host CPU's rate running the model, no IPU's: such runs are counted on
one line, never compared (one given ``measured.samples_per_s`` is compared by that). Predictions made under
different calibrations (the ``calibration`` tag) are not comparable either: ``calibration_warning`` says so,
``under_calibration`` keeps one.
"""
from __future__ import annotations

import math
import statistics
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ipuexp.calibration import band_ends as edges
from ipuexp.files import savefig_whole
from ipuexp.report.sweep import Point, ReportError, Sweep, swept_options
from ipuexp.units import column_unit, human_bytes


def measured_points(sweep: Sweep) -> List[Point]:
    """Points with an IPU measurement (throughput, or memory from PopVision), highest predicted rate first."""
    points = [p for p in sweep.points if p.ipu_measured is not None
              or (p.measured_memory is not None and p.measured_on != "host")]
    return sorted(points, key=lambda p: -(p.rate or 0.0))


def host_points(sweep: Sweep) -> List[Point]:
    """Functional runs: their measurement is the host CPU's."""
    return [p for p in sweep.points if p.measured_on == "host"]


def in_band(p: Point) -> Optional[bool]:
    """The IPU measurement lies within the prediction's error band, its edge included; None without a measurement
    or a band."""
    if p.measured_ratio is None or p.error_band_pct is None:
        return None
    return edges.inside(p.rate, p.ipu_measured, p.error_band_pct)


def error(p: Point) -> Optional[float]:
    """The prediction's error against the IPU measurement, percent (``predicted / measured - 1``); None without
    one."""
    return None if p.measured_ratio is None else edges.error_pct(p.rate, p.ipu_measured)


def summary(points: List[Point]) -> Optional[str]:
    """``N runs: median |predicted/measured - 1| M%, worst +W%; K of B in band``; None when nothing was measured."""
    compared = [p for p in points if p.measured_ratio is not None]
    if not compared:
        return None
    errors = [error(p) for p in compared]
    banded = [in_band(p) for p in compared if in_band(p) is not None]
    line = (f"{len(compared)} run{'s' if len(compared) > 1 else ''}: median |predicted/measured - 1| "
            f"{statistics.median(abs(e) for e in errors):.1f}%, worst {max(errors, key=abs):+.1f}%; "
            f"{sum(banded)} of {len(banded)} in band")
    return line + (f", {len(compared) - len(banded)} with no band" if len(banded) < len(compared) else "")


def host_note(sweep: Sweep) -> Optional[str]:
    n = len(host_points(sweep))
    return f"{n} functional run{'s' if n > 1 else ''} left out: a host CPU's throughput is no IPU's" if n else None


def print_measured(sweep: Sweep, console: Any = None) -> None:
    """The measured runs as a table within the terminal's width (the figures whole, the run names fold), the
    summary line below it, and the line about functional runs."""
    from ipuexp.terminal_table import terminal_console

    console = console or terminal_console()
    points = measured_points(sweep)
    if points:
        console.print(_table(points))
    for line in (summary(points), host_note(sweep)):
        if line:
            console.print(line, highlight=False)


def _table(points: List[Point]) -> Any:
    """The measured runs, a row each (:mod:`ipuexp.terminal_table`): the run names fold, the figures stay whole; the
    memory columns carry their unit in the header, which keeps their cells short."""
    from ipuexp.report.sweep_plots import rate_label
    from ipuexp.terminal_table import Column, Table

    unit = rate_label(points)
    memory = any(p.measured_memory is not None for p in points)
    mem_unit = column_unit([v for p in points for v in (p.peak_memory, p.measured_memory) if v], largest="MiB")
    columns = [Column("run", figure=False), Column(f"predicted {unit}", figure=True), Column("band", figure=True),
               Column(f"measured {unit}", figure=True), Column("error", figure=True),
               Column("in band", figure=False, align="right")]
    if memory:
        columns += [Column(f"memory predicted {mem_unit}", figure=True),
                    Column(f"memory measured {mem_unit}", figure=True)]
    rows = [[p.name, *_cells(p, mem_unit if memory else None)] for p in points]
    return Table(columns, rows, title="Predicted vs measured")


def _cells(p: Point, mem_unit: Optional[str]) -> List[Any]:
    """A row's figures; the memory ones in ``mem_unit``, none without one."""
    from rich.text import Text

    mark = {True: Text("✓", style="green"), False: Text("✗", style="red"), None: Text("-")}[in_band(p)]
    row = [_num(p.rate), "-" if p.error_band_pct is None else f"±{p.error_band_pct:.0f}%", _num(p.ipu_measured),
           "-" if p.measured_ratio is None else f"{error(p):+.1f}%", mark]
    if mem_unit:
        row += [_bytes(p.peak_memory, mem_unit), _bytes(p.measured_memory, mem_unit)]
    return row


def _num(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _bytes(x: Optional[float], unit: str) -> str:
    return "-" if x is None else human_bytes(x, 1, unit).rsplit(" ", 1)[0]


def plot_measured(sweep: Sweep, path: Path) -> Path:
    """Predicted (y) against measured (x) rate on log axes, the band as error bars around each prediction and the
    line where they agree; points outside their band in red. Drawn on a ``Figure`` (Agg), as the sweep's charts:
    no pyplot state, no display."""
    from matplotlib.figure import Figure

    from ipuexp.report.sweep_plots import rate_label

    points = [p for p in measured_points(sweep) if p.ipu_measured is not None and p.rate]
    unit = rate_label(points)
    fig = Figure(figsize=(6.5, 6), layout="constrained")
    ax = fig.add_subplot()
    colors = {True: "C0", False: "C3", None: "0.5"}
    ends = [band_ends(p) for p in points]
    values = [v for p, (low, _) in zip(points, ends) for v in (p.ipu_measured, p.rate, low)]
    # An upper end far above every point (a band near 100%) would squeeze the points: it runs off the axis instead.
    values += [high for _, high in ends if high is not None and high <= REACH_UP * max(values)]
    lo, hi = min(values) / 1.15, max(values) * 1.15  # one range on both axes: y = x is the diagonal
    seen: Dict[Tuple[float, float], int] = {}
    for n, (p, (low, high)) in enumerate(zip(points, ends), 1):
        color, marker = colors[in_band(p)], MARKERS[(n - 1) % len(MARKERS)]
        # Runs at the same spot: each its own marker, smaller over larger and hollow, so every one shows.
        spot = (round(math.log(p.ipu_measured), 2), round(math.log(p.rate), 2))
        k = seen[spot] = seen.get(spot, -1) + 1
        open_top = high is None or high > hi  # no upper end (a band of 100% or more), or beyond the axis
        top = hi if open_top else high
        ax.errorbar([p.ipu_measured], [p.rate], yerr=[[p.rate - low], [top - p.rate]], fmt=marker,
                    color=color, markersize=max(10 - 3 * k, 4), markerfacecolor="none", markeredgewidth=1.5,
                    capsize=4, zorder=3 + k, label=_clip(f"{n}: {p.name}", 60))
        if open_top:
            ax.plot([p.ipu_measured], [hi], marker="^", color=color, markersize=7, zorder=3, clip_on=False)
    for label, inside in (("inside its error band", True), ("outside its error band", False),
                          ("no error band logged", None)):
        if any(in_band(p) is inside for p in points):
            ax.plot([], [], linestyle="-", color=colors[inside], label=label)
    if any(high is None or high > hi for _, high in ends):
        ax.plot([], [], marker="^", linestyle="none", color="0.3", label="band continues beyond the axis")
    ax.plot([lo, hi], [lo, hi], color="0.3", linestyle="--", linewidth=1, label="predicted = measured", zorder=2)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), aspect="equal",
           xlabel=f"measured on an IPU system ({unit})", ylabel=f"predicted ± error band ({unit})",
           title=textwrap.fill(f"{sweep.experiment}: predicted vs measured throughput", 60))
    _ticks(ax, lo, hi)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="best")  # off the diagonal, where fewer points lie
    path.parent.mkdir(parents=True, exist_ok=True)
    savefig_whole(fig, path, dpi=120)
    return path


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


REACH_UP = 3.0
"""An upper band end more than this factor above every point runs off the top of the chart, marked by an arrow."""
MARKERS = ("o", "s", "^", "D", "P", "X", "*", "h")
"""One marker per run (cycled), so runs at the same spot are told apart; the colour says in band or not."""


def band_ends(p: Point) -> Tuple[float, Optional[float]]:
    """The lowest and highest measurement inside the prediction's band, as ``in_band`` reads it; the highest None
    when the band is 100% or more (it has no upper end)."""
    return edges.band_ends(p.rate, p.error_band_pct or 0.0)


def _ticks(ax: Any, lo: float, hi: float) -> None:
    """Labelled ticks on both log axes, as plain numbers: 1, 2 and 5 of each decade (the decades alone over a wide
    range); within less than a factor 4, where those would be one or two, round linear ones."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    ticks = [v for v in MaxNLocator(nbins=7, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi) if lo <= v <= hi]
    for axis in (ax.xaxis, ax.yaxis):
        if hi / lo < 4:
            axis.set_major_locator(FixedLocator(ticks))
        else:  # 1, 2 and 5 of each decade while their labels have room, else the decades
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if hi / lo < 300 else (1.0,)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 10 else f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())


def calibrations(points: List[Point]) -> List[str]:
    """The calibrations the points were predicted under, as ``name (hash)``. A run that logged no hash (an older
    run, or none tagged at all: ``shipped``) counts under its name's hashed calibration when there is one."""
    hashed = {p.calibration_name for p in points if p.calibration and p.calibration != p.calibration_name}
    return sorted({p.calibration or p.calibration_name for p in points} - hashed)


def calibration_warning(sweep: Sweep) -> Optional[str]:
    """One line when the points were predicted under more than one calibration; None when under one."""
    found = calibrations(sweep.points)
    if len(found) < 2:
        return None
    names = sorted({p.calibration_name for p in sweep.points})
    hint = ("--calibration NAME reports one" if len(names) > 1 else
            f"calibration {names[0]} changed between them: re-run the older runs to compare")
    return (f"runs made under {len(found)} calibrations ({', '.join(found)}): their predictions are not "
            f"comparable; {hint}")


def under_calibration(sweep: Sweep, name: str) -> Sweep:
    """The points predicted under calibration ``name`` (runs without the tag: ``shipped``); a ReportError naming
    the calibrations present when none was."""
    points = [p for p in sweep.points if p.calibration_name == name]
    if not points:
        present = ", ".join(sorted({p.calibration_name for p in sweep.points}))
        raise ReportError(f"calibration={name!r}: no runs of {sweep.experiment!r} were made under it; "
                          f"calibrations present: {present}")
    return replace(sweep, points=points, options=swept_options(points))
