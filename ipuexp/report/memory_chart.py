"""Memory and liveness charts, after PopVision's memory report (per-IPU totals by category against capacity) and
liveness report (bytes live at each program step). Matplotlib with the Agg backend, imported when drawn."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence, Tuple, Union

from ipuexp.files import savefig_whole
from ipuexp.report.gc_freeze import existing_objects_frozen
from ipuexp.result import MemoryFigures
from ipuexp.units import MIB, human_bytes

# Category order and colours: always-live categories in cool colours, not-always-live ones in warm colours.
_COLOURS = {
    "weights": "#1f4e79", "gradient_accumulators": "#2e75b6", "optimizer_state": "#9dc3e6",
    "stash": "#548235", "host_io_buffers": "#a9d18e", "control_code": "#7030a0",
    "internal_exchange_code": "#9e70c0", "host_exchange_code": "#c5a5dd", "global_exchange_code": "#e2d3ee",
    "activations": "#c55a11", "temporary": "#f4b183", "gradients": "#bf9000", "streamed": "#ffd966",
}
_MIB = float(MIB)


def _figure(width: float, height: float):
    """A figure and its axes, rendered by Agg: no pyplot (its import and figure registry cost, and nothing here
    needs them)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    return fig, fig.subplots()


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.set_layout_engine(None)  # laid out: with no engine left (not even "none"), savefig draws once, not twice
    savefig_whole(fig, path, dpi=110)


@existing_objects_frozen()
def save_memory_chart(memory: MemoryFigures, path: Union[str, Path], title: Optional[str] = None) -> Path:
    """Stacked bars of each IPU's memory by category, with the IPU's capacity; returns the PNG path."""
    path = Path(path)
    labels = [f"IPU {m.ipu}" for m in memory.ipus]
    categories = [c for c in _COLOURS if any(m.breakdown.get(c, 0) for m in memory.ipus)]
    categories += sorted({c for m in memory.ipus for c in m.breakdown} - set(_COLOURS))
    fig, ax = _figure(max(5.0, 1.2 * len(labels) + 3.0), 5.0)
    bottoms = [0.0] * len(labels)
    for cat in categories:
        values = [m.breakdown.get(cat, 0) / _MIB for m in memory.ipus]
        ax.bar(labels, values, bottom=bottoms, color=_COLOURS.get(cat), label=cat.replace("_", " "),
               edgecolor="white", linewidth=0.4)
        bottoms = [b + v for b, v in zip(bottoms, values)]
    for i, m in enumerate(memory.ipus):
        cap = m.capacity_bytes / _MIB
        ax.hlines(cap, i - 0.45, i + 0.45, colors="black", linestyles="--", linewidth=1.2,
                  label="capacity" if i == 0 else None)
        status = "fits" if m.fits else "OUT OF MEMORY"
        ax.annotate(f"{status}\nmax tile {human_bytes(m.max_tile_bytes, 1, 'KiB')}", (i, max(bottoms[i], cap)),
                    xytext=(0, 4), textcoords="offset points", ha="center", va="bottom", fontsize=7,
                    color="black" if m.fits else "#c00000")
    ax.set_ylabel("MiB")
    ax.set_title(title or ("Memory per IPU" + ("" if memory.fits else " (does not fit)")))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_ylim(0, 1.18 * max(max(bottoms), max(m.capacity_bytes for m in memory.ipus) / _MIB))
    _save(fig, path)
    return path


@existing_objects_frozen()
def save_liveness_chart(steps: Sequence[Tuple[str, int, int]], path: Union[str, Path],
                        capacity_bytes: Optional[int] = None, title: Optional[str] = None) -> Path:
    """Always-live and not-always-live bytes at each program step of one IPU; returns the PNG path.

    ``steps`` are (label, always-live bytes, not-always-live bytes), as ``emulator.memory.liveness_series`` gives.
    """
    path = Path(path)
    if not steps:
        raise ValueError("liveness chart: no program steps to plot")
    labels = [s[0] for s in steps]
    always = [s[1] / _MIB for s in steps]
    nal = [s[2] / _MIB for s in steps]
    x = list(range(len(steps)))
    fig, ax = _figure(max(6.0, 0.22 * len(steps) + 3.0), 4.5)
    ax.stackplot(x, always, nal, labels=["always live", "not always live"], colors=["#2e75b6", "#f4b183"],
                 step="mid")
    if capacity_bytes:
        ax.axhline(capacity_bytes / _MIB, color="black", linestyle="--", linewidth=1.2, label="capacity")
    peak = max(range(len(steps)), key=lambda i: always[i] + nal[i])
    ax.annotate(f"peak: {labels[peak]}", (peak, always[peak] + nal[peak]), xytext=(0, 6),
                textcoords="offset points", ha="center", fontsize=7)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=90, fontsize=6)
    ax.set_xlim(-0.5, len(steps) - 0.5)
    top = max(a + n for a, n in zip(always, nal))
    ax.set_ylim(0, 1.25 * max(top, capacity_bytes / _MIB if capacity_bytes else 0.0))
    ax.set_ylabel("MiB")
    ax.set_title(title or "Liveness")
    ax.legend(fontsize=7, loc="upper left", ncol=3)
    _save(fig, path)
    return path
