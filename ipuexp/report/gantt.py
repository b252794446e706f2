"""A PNG Gantt chart of one step: forward, recomputation and backward blocks per IPU over time.

Colours follow IPU optimisation guide Fig. 5.1 (blue forward, cyan recomputed forward, red backward); the profile
in the PopTorch pipelining tutorial shows the same view. A long step is cut into stretches (``step_segments``):
the first and last micro-batches to scale, with each block's micro-batch written on it where it fits, and between
them, behind break marks, the steady state summed up as each IPU's share of it per category.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple, Union

import numpy as np

from ipuexp.emulator.events import Event, EventRows
from ipuexp.files import savefig_whole
from ipuexp.report.event_columns import Columns, runs
from ipuexp.report.gc_freeze import existing_objects_frozen
from ipuexp.report.step_segments import Segment, micro_batches, segments, shares

COLOURS: Dict[str, str] = {
    "fwd": "tab:blue",
    "recompute": "tab:cyan",
    "bwd": "tab:red",
    "exchange": "0.65",
    "host_io": "tab:orange",
    "all_reduce": "tab:purple",
    "weight_update": "tab:brown",
}
LABELS = {"fwd": "forward", "recompute": "recompute", "bwd": "backward", "exchange": "exchange / sync",
          "host_io": "host IO", "all_reduce": "all-reduce", "weight_update": "weight update"}
LETTERS = {"fwd": "F", "recompute": "R", "bwd": "B"}
WAITING = ("host_io",)
"""Categories in which an IPU waits (for the host): not busy, as in the console's IPU utilisation."""
SUMMED_WIDTH = 0.1
"""Share of the chart's width each summed-up stretch takes."""
MIN_SCALED_WIDTH = 0.15
"""Least share of the width a stretch drawn to scale takes, however short."""
FONT = 6.5
DPI = 110


def _time_unit(end: float) -> Tuple[float, str]:
    return (1e3, "ms") if end >= 1e-3 else (1e6, "µs")


def _widths(parts: List[Segment]) -> List[float]:
    scaled = [p for p in parts if not p.summed]
    room = 1.0 - SUMMED_WIDTH * (len(parts) - len(scaled))
    total = sum(p.duration_s for p in scaled) or 1.0
    raw = [max(MIN_SCALED_WIDTH, room * p.duration_s / total) for p in scaled]
    k = room / sum(raw)
    it = iter(raw)
    return [SUMMED_WIDTH if p.summed else next(it) * k for p in parts]


def _bars(ax, xs: np.ndarray, widths: np.ndarray, rows: Any, colours: List[Tuple[str, int]]) -> None:
    """The rectangles ``ax.broken_barh([(x, w), ...], (row - 0.4, 0.8), facecolors=colour, linewidth=0)`` draws
    (bottom-aligned, corners in its order), one call for each (colour, count) of ``colours`` in turn, as one
    collection drawn in the same order, with the vertices built at once. They take no part in autoscaling (each
    autoscale is costly): the chart sets its limits itself."""
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgba

    y0 = np.asarray(rows, dtype=np.float64) - 0.4
    y1 = y0 + 0.8
    x1 = xs + widths
    verts = np.empty((len(xs), 4, 2))
    verts[:, 0, 0], verts[:, 1, 0], verts[:, 2, 0], verts[:, 3, 0] = xs, xs, x1, x1
    verts[:, 0, 1], verts[:, 1, 1], verts[:, 2, 1], verts[:, 3, 1] = y0, y1, y1, y0
    faces = np.repeat([to_rgba(colour) for colour, _ in colours], [n for _, n in colours], axis=0)
    ax.add_collection(PolyCollection(verts, facecolors=faces, linewidth=0), autolim=False)


def _draw_scaled(ax, c: Columns, rows: Dict[int, int], part: Segment, scale: float) -> np.ndarray:
    """The blocks of one stretch to scale; returns the indices of the passes in it, for their labels."""
    inside = np.flatnonzero(~((c.start >= part.end_s) | (c.start + c.dur <= part.start_s)))
    # Each (IPU, category) in order of first appearance, as broken_barh calls would draw them.
    order = runs(c.ipu[inside] * len(c.kinds) + c.cat[inside])
    if order:
        bars = inside[np.concatenate(order)]
        bar_rows = np.array([rows[i] for i in sorted(rows)])[np.searchsorted(sorted(rows), c.ipu[bars])]
        colours = [(COLOURS.get(c.kinds[c.cat[inside[r[0]]]], "0.3"), len(r)) for r in order]
        _bars(ax, c.start[bars] * scale, c.dur[bars] * scale, bar_rows, colours)
    ax.set_xlim(part.start_s * scale, part.end_s * scale)
    return inside[c.of_kind(*LETTERS)[inside]]


def _label_blocks(ax, c: Columns, passes: np.ndarray, rows: Dict[int, int], part: Segment, scale: float) -> None:
    """Each pass's micro-batch on its block ("F12", upright on a narrow block, else "12"), where it fits."""
    box = ax.get_window_extent()
    px_per_s = box.width / max(part.duration_s, 1e-12)
    bar_px = 0.8 * box.height / max(len(rows), 1) - 4
    char_px = 0.64 * FONT * DPI / 72  # DejaVu Sans digits are 0.64 em wide
    line_px = 1.2 * FONT * DPI / 72
    for start, dur, kind, mb, ipu in zip(c.start[passes].tolist(), c.dur[passes].tolist(), c.cat[passes].tolist(),
                                         c.mb[passes].tolist(), c.ipu[passes].tolist()):
        a, b = max(start, part.start_s), min(start + dur, part.end_s)
        room = (b - a) * px_per_s - 3
        text = f"{LETTERS[c.kinds[kind]]}{mb}"
        number = str(mb)
        for label, rotation in ((text, 0), (text, 90), (number, 0), (number, 90)):
            along, across = (room, bar_px) if rotation == 0 else (bar_px, room)
            if len(label) * char_px <= along and line_px <= across:
                ax.text((a + b) / 2 * scale, rows[ipu], label, ha="center", va="center", fontsize=FONT,
                        rotation=rotation, color="white", clip_on=True)
                break


def _draw_summed(ax, c: Columns, rows: Dict[int, int], part: Segment, scale: float, unit: str) -> None:
    """Each IPU's share of the stretch per category, as bars side by side in a frame the stretch's length; the
    blank rest of the frame is idle time."""
    from matplotlib.patches import Rectangle

    share_of = shares(c, part)
    for ipu, row in rows.items():
        x = 0.0
        for cat in COLOURS:
            share = share_of.get(ipu, {}).get(cat, 0.0)
            if share > 0:
                _bars(ax, np.array([x]), np.array([share]), [row], [(COLOURS[cat], 1)])
                x += share
        ax.add_patch(Rectangle((0.0, row - 0.4), 1.0, 0.8, fill=False, edgecolor="0.35", linewidth=0.6))
        ax.text(0.5, row, f"busy {_busy(share_of.get(ipu, {})):.0%}", ha="center", va="center", fontsize=FONT,
                color="0.1", bbox=dict(facecolor="white", alpha=0.8, linewidth=0, pad=1.0))
    ax.set_xlim(-0.04, 1.04)
    ax.set_xticks([0.5], [f"{part.duration_s * scale:,.1f} {unit}"])
    ax.tick_params(axis="x", length=0, labelsize=7)
    ax.set_xlabel(part.label, fontsize=7, color="0.25")
    ax.set_facecolor("0.96")


def _busy(share: Dict[str, float]) -> float:
    """The share of a stretch an IPU computes or exchanges: neither idle nor waiting for the host."""
    return min(1.0, sum(v for k, v in share.items() if k not in WAITING))


def _break_marks(ax, left: bool, right: bool) -> None:
    """Diagonal strokes on the top and bottom edges where the time axis is cut (fixed in size, not in data)."""
    xs = ([0.0] if left else []) + ([1.0] if right else [])
    for x in xs:
        ax.plot([x, x], [0.0, 1.0], transform=ax.transAxes, linestyle="none", marker=[(-1, -2), (1, 2)],
                markersize=9, markeredgewidth=0.9, color="k", clip_on=False)


@existing_objects_frozen()
def draw_gantt(events: Union[Sequence[Event], EventRows], path: Union[str, Path], title: str = "") -> Path:
    """Draw the step's events (``ipuexp.emulator.timing.step_events``, or as columns ``step_rows``) to a PNG at
    ``path``."""
    path = Path(path)
    fig = gantt_figure(events, title)
    # The layout once more, with the block labels, as savefig would; with no layout engine left, savefig draws
    # once, not twice.
    fig.get_layout_engine().execute(fig)
    fig.set_layout_engine(None)
    savefig_whole(fig, path, dpi=DPI)
    return path


def gantt_figure(events: Union[Sequence[Event], EventRows], title: str = "") -> Any:
    """The chart as a matplotlib ``Figure`` (object API, rendered by Agg: no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    c = Columns(events)
    c = c.where(c.dur > 0)
    ipus = c.present("ipu") if len(c) and c.ipu.min() >= 0 else np.unique(c.ipu).tolist()
    rows = {ipu: n for n, ipu in enumerate(ipus)}
    end = float((c.start + c.dur).max()) if len(c) else 0.0
    scale, unit = _time_unit(end)
    parts = segments(c)
    height = max(2.2, 0.45 * len(ipus) + 1.9)
    fig = Figure(figsize=(14, height), dpi=DPI, layout="constrained")
    # An Agg canvas of its own: the layout passes and savefig then share one renderer and its text metrics (a
    # figure without one makes a renderer, and measures every text again, each time).
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(parts), sharey=True, squeeze=False, gridspec_kw={"width_ratios": _widths(parts)})
    fig.get_layout_engine().set(wspace=0.0, w_pad=0.01)
    axes = list(axes[0])
    scaled: List[Tuple[object, Segment, np.ndarray]] = []
    for n, (ax, part) in enumerate(zip(axes, parts)):
        if part.summed:
            _draw_summed(ax, c, rows, part, scale, unit)
        else:
            scaled.append((ax, part, _draw_scaled(ax, c, rows, part, scale)))
            ax.set_xlabel(f"time ({unit})" if len(parts) == 1 else f"time since the step began ({unit})",
                          fontsize=8)
            ax.tick_params(axis="x", labelsize=7)
        _break_marks(ax, left=n > 0, right=n < len(parts) - 1)
        if n > 0:
            ax.spines["left"].set_visible(False)
            ax.tick_params(axis="y", length=0)
        if n < len(parts) - 1:
            ax.spines["right"].set_visible(False)
    # Beside each IPU its share of the whole step, the console's IPU utilisation; in a grey panel, of that stretch.
    step = shares(c, Segment(0.0, end, True)) if end > 0 else {}
    axes[0].set_yticks(range(len(ipus)), [f"IPU {i}\nbusy {_busy(step.get(i, {})):.0%}" for i in ipus])
    axes[0].set_ylim(len(ipus) - 0.5, -0.5)
    n = micro_batches(c)
    present = [k for k in COLOURS if k in {c.kinds[i] for i in c.present("cat")}]
    handles = [Patch(color=COLOURS[k], label=LABELS[k]) for k in present]
    if any(p.summed for p in parts):  # a summed stretch: its frame's blank part
        handles.append(Patch(facecolor="white", edgecolor="0.35", label="idle (grey panels: time summed up, "
                                                                        "not to scale)"))
    fig.suptitle(f"{title or 'one step'} ({n:,} micro-batch{'es' if n != 1 else ''}, {end * scale:,.1f} {unit})\n"
                 "busy: computing or exchanging, not idle or waiting for host IO, beside each IPU of the whole step "
                 "(the console's IPU utilisation), in a grey panel of its stretch", fontsize=9, linespacing=1.4)
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.get_layout_engine().execute(fig)  # the labels need each block's final width in pixels
    for ax, part, passes in scaled:
        _label_blocks(ax, c, passes, rows, part, scale)
    return fig
