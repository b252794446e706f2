"""A PNG Gantt chart of one step: forward, recomputation and backward blocks per IPU over time.

Colours follow IPU optimisation guide Fig. 5.1 (blue forward, cyan recomputed forward, red backward); the profile
in the PopTorch pipelining tutorial shows the same view. With many micro-batches the whole step is one panel and
a second panel zooms on the ramp-up, where the blocks of single micro-batches can be read.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from ipuexp.emulator.pipeline import Event

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
ZOOM_MICRO_BATCHES = 12
"""Above this many micro-batches a second panel zooms on the start of the step."""


def _zoom_end(events: Sequence[Event]) -> Optional[float]:
    """End of the backward of micro-batch 3 on the first stage: ramp-up plus a few steady cycles."""
    mbs = {e.micro_batch for e in events if e.micro_batch >= 0}
    if len(mbs) <= ZOOM_MICRO_BATCHES:
        return None
    target = min(3, max(mbs))
    first_stage = min(e.stage for e in events if e.stage >= 0)
    ends = [e.start_s + e.duration_s for e in events
            if e.category == "bwd" and e.micro_batch == target and e.stage == first_stage]
    if not ends:  # inference: forward passes only
        ends = [e.start_s + e.duration_s for e in events if e.micro_batch == 2 * target]
    return max(ends) if ends else None


def _draw(ax, events: Sequence[Event], ipus: List[int], scale: float, unit: str, label_blocks: bool,
          window: Optional[Tuple[float, float]]) -> None:
    by_key: Dict[Tuple[int, str], List[Tuple[float, float]]] = {}
    for e in events:
        if window and (e.start_s > window[1] or e.start_s + e.duration_s < window[0]):
            continue
        by_key.setdefault((e.ipu, e.category), []).append((e.start_s * scale, e.duration_s * scale))
    row = {ipu: n for n, ipu in enumerate(ipus)}
    for (ipu, cat), spans in by_key.items():
        ax.broken_barh(spans, (row[ipu] - 0.4, 0.8), facecolors=COLOURS.get(cat, "0.3"), linewidth=0)
    if label_blocks and window:
        for e in events:
            if e.category in ("fwd", "bwd") and e.start_s < window[1] and e.start_s + e.duration_s > window[0]:
                ax.text((e.start_s + e.duration_s / 2) * scale, row[e.ipu], f"{'F' if e.category == 'fwd' else 'B'}"
                        f"{e.micro_batch}", ha="center", va="center", fontsize=6, color="white", clip_on=True)
    ax.set_yticks(range(len(ipus)), [f"IPU {i}" for i in ipus])
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit})")
    if window:
        ax.set_xlim(window[0] * scale, window[1] * scale)


def _raster(ax, events: Sequence[Event], ipus: List[int], end: float, scale: float, unit: str,
            width: int = 1600) -> None:
    """Whole-step panel for many micro-batches: each pixel column shows the category that fills most of it
    (tens of thousands of blocks would each be narrower than a pixel and drawing them takes seconds)."""
    import numpy as np
    from matplotlib.colors import ListedColormap, to_rgb

    cats = list(COLOURS)
    dt = end / width
    cover = np.zeros((len(ipus), len(cats), width + 1))
    row = {ipu: n for n, ipu in enumerate(ipus)}
    for e in events:
        c = cats.index(e.category) if e.category in cats else None
        if c is None:
            continue
        a, b = e.start_s / dt, (e.start_s + e.duration_s) / dt
        i0, i1 = int(a), min(int(b), width)
        line = cover[row[e.ipu], c]
        if i0 == i1:
            line[i0] += b - a
        else:
            line[i0] += i0 + 1 - a
            line[i0 + 1:i1] += 1.0
            line[i1] += b - i1
    # A column shows its busiest category when the IPU works in at least a tenth of it, else it is left blank.
    best = np.where(cover.sum(axis=1) >= 0.1, cover.argmax(axis=1), len(cats))
    cmap = ListedColormap([to_rgb(COLOURS[c]) for c in cats] + [(1.0, 1.0, 1.0)])
    ax.imshow(best[:, :width], aspect="auto", interpolation="nearest", cmap=cmap, vmin=0, vmax=len(cats),
              extent=(0, end * scale, len(ipus) - 0.5, -0.5))
    ax.set_yticks(range(len(ipus)), [f"IPU {i}" for i in ipus])
    ax.set_xlabel(f"time ({unit})")


def draw_gantt(events: Sequence[Event], path: Union[str, Path], title: str = "") -> Path:
    """Draw the step's events (``ipuexp.emulator.timing.step_events``) to a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    path = Path(path)
    events = [e for e in events if e.duration_s > 0]
    ipus = sorted({e.ipu for e in events})
    end = max((e.start_s + e.duration_s for e in events), default=0.0)
    scale, unit = (1e3, "ms") if end >= 1e-3 else (1e6, "us")
    zoom = _zoom_end(events)
    panels = 2 if zoom else 1
    height = max(1.5, 0.45 * len(ipus) + 1.0)
    fig, axes = plt.subplots(panels, 1, figsize=(12, height * panels + 0.6), squeeze=False)
    if zoom:
        _raster(axes[0][0], events, ipus, end, scale, unit)
        _draw(axes[1][0], events, ipus, scale, unit, label_blocks=True, window=(0.0, zoom))
        axes[1][0].set_title("start of the step (ramp-up)")
    else:
        _draw(axes[0][0], events, ipus, scale, unit, label_blocks=True, window=(0.0, end))
    axes[0][0].set_title(title or "one step")
    present = [c for c in COLOURS if any(e.category == c for e in events)]
    fig.legend(handles=[Patch(color=COLOURS[c], label=LABELS[c]) for c in present], loc="lower center",
               ncol=len(present), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
