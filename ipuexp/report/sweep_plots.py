"""Charts of a sweep: throughput against each swept option, and throughput against peak IPU memory.

Drawn with matplotlib's object API (``Figure``, rendered by Agg), so no pyplot state or display is involved.
Memory is in MiB, as PopVision shows an IPU's (``ipuexp.units``).
"""
from __future__ import annotations

import math
import textwrap
from itertools import groupby
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ipuexp.files import savefig_whole
from ipuexp.report import label_placement
from ipuexp.report.option_values import compact, is_integer, order, parse
from ipuexp.report.sweep import Point, Sweep, pareto_front, pareto_numbers, sweep_numbers
from ipuexp.units import MIB

MAX_SERIES = 8
"""Beyond this many combinations of the other options, points are drawn without lines or legend entries."""
MAX_VALUE_TICKS = 12
"""Up to this many distinct numbers, each gets a tick of its own."""
MAX_NUMBERED = 20
"""A longer Pareto front has evenly spaced points numbered, so that the numbers and the key stay legible."""
KEY_WIDTH = 44
"""Characters per line of the Pareto chart's key."""


def _short(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def _slug(key: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in key)


def _log_base(xs: List[float]) -> Optional[int]:
    """A log axis for positive values spanning 8x or more: base 2 for powers of two (GA, batch sizes)."""
    if not xs or min(xs) <= 0 or max(xs) / min(xs) < 8:
        return None
    return 2 if all(float(x).is_integer() and math.log2(x).is_integer() for x in xs) else 10


LABEL_CHAR_SHARE = 0.016
"""Share of the x axis one character of a tick label takes (a 7-inch chart, small font), with a little gap."""


def _labels_fit(distinct: List[float], labels: List[str], log: bool) -> bool:
    """A tick at every value reads only when neighbouring labels do not run into each other: the closest two
    values must lie further apart than their labels are wide (Optuna's 0.1593 and 0.1648 on a 0.16-0.39 axis
    do not)."""
    if len(distinct) < 2:
        return True
    pos = [math.log(x) for x in distinct] if log else list(distinct)
    span = pos[-1] - pos[0]
    for (a, la), (b, lb) in zip(zip(pos, labels), zip(pos[1:], labels[1:])):
        if (b - a) / span < (len(la) + len(lb)) / 2 * LABEL_CHAR_SHARE + LABEL_CHAR_SHARE:
            return False
    return True


def option_axis(ax, values: List[str]) -> List[float]:
    """x positions of the values of one option, with ticks a reader can take in: every number up to a dozen
    (integers as integers), else integer or plain ticks; values that are not all numbers (a scalar in some
    runs, a list per IPU in others; paths) as ordered categories with short labels."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter, NullLocator

    parsed = [parse(v) for v in values]
    if all(isinstance(v, (int, float)) for v in parsed):
        xs = [float(v) for v in parsed]
        distinct = sorted(set(xs))
        base = _log_base(distinct)
        if base:
            ax.set_xscale("log", base=base)
        integers = all(is_integer(v) for v in values)
        labels = [f"{int(x)}" if integers else f"{x:g}" for x in distinct]
        if len(distinct) <= MAX_VALUE_TICKS and _labels_fit(distinct, labels, base is not None):
            ax.set_xticks(distinct, labels)
            ax.xaxis.set_minor_locator(NullLocator())
            return xs
        if base == 10:
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        elif integers and not base:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        # Plain numbers (no 10^1 or 1.5x10^1), and no labels on a log axis's minor ticks.
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}" if float(x).is_integer() else f"{x:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        return xs
    labels = sorted(set(values), key=order)
    ax.set_xticks(range(len(labels)), [compact(v) for v in labels])
    if sum(len(compact(v)) for v in labels) > 60:  # would run into each other horizontally
        for tick in ax.get_xticklabels():
            tick.set_rotation(30)
            tick.set_horizontalalignment("right")
    return [float(labels.index(v)) for v in values]


def throughput_vs_option(sweep: Sweep, key: str, path: Path) -> Path:
    """Throughput against option ``key``: one line per combination of the other swept options. Runs without
    the key (outside the sweeps that vary it) are left out."""
    from matplotlib.figure import Figure

    # Sweep points only: a run of its own has the key among its parameters without sweeping it; each sweep is
    # a series of its own.
    points = [p for p in sweep.points if p.rate is not None and key in p.params and p.sweep_id is not None]
    others = [o for o in sweep.options if o != key]
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    sweeps = sweep_numbers(points)

    def series(p: Point) -> Tuple[str, ...]:
        return tuple(compact(p.params.get(o)) for o in others) + ((f"sweep {sweeps[p.run_id]}",) if sweeps else ())

    groups = [list(g) for _, g in groupby(sorted(points, key=series), key=series)]
    xs_all = option_axis(ax, [p.params[key] for p in points])
    x_of = {p.run_id: x for p, x in zip(points, xs_all)}
    for group in groups:
        group.sort(key=lambda p: x_of[p.run_id])
        xs, ys = [x_of[p.run_id] for p in group], [p.rate for p in group]
        label = ", ".join([f"{_short(o)}={v}" for o, v in zip(others, series(group[0]))]
                          + list(series(group[0])[len(others):])) or None
        if len(groups) <= MAX_SERIES:
            ax.plot(xs, ys, marker="o", label=label)
        else:
            ax.plot(xs, ys, marker="o", linestyle="none", color="C0")
        bad = [(x, y) for p, x, y in zip(group, xs, ys) if p.fits is False]
        if bad:  # configurations that do not fit: their throughput is what they would reach with enough memory
            ax.plot(*zip(*bad), marker="x", markersize=10, linestyle="none", color="red")
    if any(p.fits is False for p in points):
        ax.plot([], [], marker="x", linestyle="none", color="red", label="does not fit")
    ax.set_xlabel(key)
    ax.set_ylabel(rate_label(points))
    ax.set_title(f"{sweep.experiment}: throughput vs {_short(key)}")
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    path.parent.mkdir(parents=True, exist_ok=True)
    savefig_whole(fig, path, dpi=120)
    return path


def _numbered(front: List[Point]) -> List[Point]:
    """The front points the chart numbers: all of a short front, else evenly spaced ones and the last."""
    if len(front) <= MAX_NUMBERED:
        return front
    step = -(-len(front) // MAX_NUMBERED)
    return front[::step] + ([front[-1]] if (len(front) - 1) % step else [])


def _key_lines(sweep: Sweep, front: List[Point], numbers: Dict[str, int]) -> List[str]:
    """The key of the numbered Pareto points: the swept values they share, once, then each number with the
    values that set it apart (the run name when nothing swept does)."""
    short = {o: _short(o) for o in sweep.options}
    if len(set(short.values())) < len(short):
        short = {o: o for o in sweep.options}

    def value(p: Point, o: str) -> str:
        return f"{short[o]}={compact(p.params.get(o))}"

    shared = [o for o in sweep.options if len(front) > 1 and len({value(p, o) for p in front}) == 1]
    lines = textwrap.wrap("all: " + " ".join(value(front[0], o) for o in shared), KEY_WIDTH,
                          subsequent_indent="    ") if shared else []
    for p in front:
        what = " ".join(value(p, o) for o in sweep.options if o not in shared and o in p.params) or p.name
        lines += textwrap.wrap(f"{numbers[p.run_id]}: {what}", KEY_WIDTH, subsequent_indent="    ")
    return lines


def pareto_chart(sweep: Sweep, path: Path) -> Path:
    """``pareto_figure`` as a PNG at ``path``."""
    fig = pareto_figure(sweep)
    path.parent.mkdir(parents=True, exist_ok=True)
    savefig_whole(fig, path, dpi=120)
    return path


def pareto_figure(sweep: Sweep) -> Any:
    """Throughput against peak IPU memory. The Pareto front of the configurations that fit is joined up and
    numbered, each number placed where it covers no marker and no other number; a key beside the chart says
    what each number is (the console table numbers the same rows)."""
    from matplotlib.figure import Figure

    points = [p for p in sweep.points if p.rate is not None and p.peak_memory is not None]
    front = pareto_front(points)
    numbers = pareto_numbers(points)
    numbered = _numbered(front)
    key = _key_lines(sweep, numbered, numbers)
    if len(numbered) < len(front):
        key[:0] = textwrap.wrap(f"{len(numbered)} of its {len(front)} points numbered (ringed); the console "
                                "table numbers all", KEY_WIDTH)
    fig = Figure(figsize=(10 if key else 7, max(4.5, 0.9 + 0.13 * len(key))), layout="constrained")
    grid = fig.add_gridspec(1, 2, width_ratios=(7, 3)) if key else fig.add_gridspec(1, 1)
    ax = fig.add_subplot(grid[0, 0])
    fit = [p for p in points if p.fits is not False]
    oom = [p for p in points if p.fits is False]
    if fit:
        ax.scatter([p.peak_memory / MIB for p in fit], [p.rate for p in fit], color="C0", alpha=0.5,
                   label="fits")
    if oom:
        ax.scatter([p.peak_memory / MIB for p in oom], [p.rate for p in oom], color="red", marker="x",
                   label="does not fit")
    if front:
        ax.plot([p.peak_memory / MIB for p in front], [p.rate for p in front], color="C1", marker="o",
                label="Pareto front")
    if sweep.capacity:
        ax.axvline(sweep.capacity / MIB, color="grey", linestyle="--", label="IPU memory")
    ax.set_xlabel("peak memory of the fullest IPU (MiB)")
    ax.set_ylabel(rate_label(points))
    ax.set_title(f"{sweep.experiment}: throughput vs memory")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    if front:
        side = fig.add_subplot(grid[0, 1])
        side.axis("off")
        side.text(0.0, 1.0, "Pareto front\n" + "\n".join(key), va="top", ha="left", fontsize=7,
                  family="monospace", transform=side.transAxes)
        _number_front(fig, ax, points, numbered, numbers, ring=len(numbered) < len(front))
    return fig


def _number_front(fig, ax, points: List[Point], front: List[Point], numbers: Dict[str, int], ring: bool) -> None:
    """Write each numbered point's number beside it, clear of the markers and of the other numbers; ``ring``
    marks the numbered points, when the front has others between them."""
    fig.draw_without_rendering()  # settle the layout, so data map to their final place on the figure
    to_pt = 72.0 / fig.dpi

    def at(p: Point) -> Tuple[float, float]:
        x, y = ax.transData.transform((p.peak_memory / MIB, p.rate))
        return x * to_pt, y * to_pt

    size = 7.0
    labels = [str(numbers[p.run_id]) for p in front]
    area = ax.get_window_extent()
    offsets = label_placement.place([at(p) for p in front], [(0.62 * size * len(t), size) for t in labels],
                                    [at(p) for p in points], marker=7.0,
                                    bounds=(area.x0 * to_pt, area.y0 * to_pt, area.x1 * to_pt, area.y1 * to_pt))
    if ring:
        ax.scatter([p.peak_memory / MIB for p in front], [p.rate for p in front], s=80, facecolors="none",
                   edgecolors="0.15", linewidths=0.9, zorder=3)
    for p, text, (dx, dy, ha, va) in zip(front, labels, offsets):
        ax.annotate(text, (p.peak_memory / MIB, p.rate), xytext=(dx, dy), textcoords="offset points",
                    ha=ha, va=va, fontsize=size, color="C1", fontweight="bold")


def draw_all(sweep: Sweep, out_dir: Path) -> List[Path]:
    """Every chart of the report into ``out_dir``."""
    paths = [throughput_vs_option(sweep, k, out_dir / f"throughput_vs_{_slug(k)}.png") for k in sweep.options]
    paths.append(pareto_chart(sweep, out_dir / "pareto.png"))
    return paths


def rate_label(points: Sequence[Point]) -> str:
    """The throughput axis: samples/s, or sequences/s once a packed run is among the points (an unpacked sample is
    one sequence)."""
    return "sequences/s" if any(p.sequences_per_s is not None for p in points) else "samples/s"
