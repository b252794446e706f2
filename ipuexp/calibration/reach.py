"""How far a configuration is from the calibration rows, along the axes that move the model's error.

A row *reaches* a configuration when, on every axis both know, the two are within ``REACH`` of each other: a
factor 1.4 in IPUs per replica (a pipeline's fill and drain grow with its stages: twice the IPUs, twice the ramp),
a factor 2 in tokens or pixels per micro-batch (the size
of every operation, the fixed costs per compute set), samples per weight update (what a step costs besides its
micro-batches: the host call, the update, the collectives), system size (the collectives' ring and its racks);
10 points of the fullest tile's headroom (how close the memory plan is to its limit); and the same host framework
(each has its own loop). The excess of a row over its reach, in reach-widths, is its distance; a configuration
that no row reaches is *extrapolated*.
"""
from __future__ import annotations

import functools
import math
from typing import Dict, List, Optional, Sequence, Tuple

from ipuexp.calibration.evidence import Point, Residual

REACH: Dict[str, float] = {
    "ipus_per_replica": 0.5,
    "elements": 1.0,
    "samples_per_step": 1.0,
    "system_ipus": 1.0,
    "tile_headroom": 0.10,
}
"""Reach of a row on each axis: log2 units for counts (1: a factor 2), a share of tile memory for the headroom."""
LOG_AXES = ("ipus_per_replica", "elements", "samples_per_step", "system_ipus")
LABELS = {
    "ipus_per_replica": "IPUs per replica",
    "elements": "per micro-batch",
    "samples_per_step": "samples per weight update",
    "system_ipus": "IPUs in use",
    "tile_headroom": "of the fullest tile free",
    "framework": "framework",
}


def _value(p: Point, axis: str) -> float:
    return float(getattr(p, axis) or 0.0)


def axis_excess(row: Point, point: Point) -> Dict[str, float]:
    """Excess of ``row`` over its reach on each axis both know, in reach-widths (0: within reach)."""
    return dict(_excess(row, point))


@functools.lru_cache(maxsize=4096)
def _excess(row: Point, point: Point) -> Tuple[Tuple[str, float], ...]:
    """``axis_excess`` as pairs (a band asks for each row's twice: the nearest row, then the axes outside all)."""
    out: Dict[str, float] = {}
    for axis in LOG_AXES:
        a, b = _value(row, axis), _value(point, axis)
        if a <= 0 or b <= 0:
            continue
        if axis == "elements" and row.elements_kind != point.elements_kind:
            out[axis] = 1.0  # tokens against pixels: nothing in common to measure
            continue
        gap = abs(math.log2(b / a))
        out[axis] = max(0.0, gap - REACH[axis]) / REACH[axis]
    if row.tile_headroom is not None and point.tile_headroom is not None:
        gap = abs(point.tile_headroom - row.tile_headroom)
        out["tile_headroom"] = max(0.0, gap - REACH["tile_headroom"]) / REACH["tile_headroom"]
    if row.framework and point.framework:
        out["framework"] = 0.0 if row.framework == point.framework else 1.0
    return tuple(out.items())


def distance(row: Point, point: Point) -> float:
    """Euclidean norm of the excess: 0 when ``row`` reaches ``point``."""
    return math.sqrt(sum(e * e for e in axis_excess(row, point).values()))


def nearest(rows: Sequence[Residual], point: Point) -> Tuple[Optional[Residual], float]:
    """The row nearest ``point`` and its distance (None, inf without rows)."""
    best, best_d = None, math.inf
    for r in rows:
        d = distance(r.point, point)
        if d < best_d:
            best, best_d = r, d
    return best, best_d


def outside_axes(rows: Sequence[Residual], point: Point) -> List[str]:
    """Axes on which ``point`` lies beyond the reach of every row (no row of its framework, no row of its kind of
    input within a factor 2, ...): where the model has no evidence at all."""
    if not rows:
        return []
    out = []
    excess = [axis_excess(r.point, point) for r in rows]
    for axis in (*LOG_AXES, "tile_headroom", "framework"):
        known = [e[axis] for e in excess if axis in e]
        if known and min(known) > 0:
            out.append(axis)
    return out


def unreached(rows: Sequence[Residual]) -> List[Residual]:
    """Rows that lie outside the others' reach on some axis: each was predicted out of sample as an
    extrapolation."""
    return [r for r in rows if outside_axes([o for o in rows if o.id != r.id], r.point)]


def extrapolation_floor(rows: Sequence[Residual]) -> Tuple[float, List[Residual]]:
    """The band an extrapolated prediction gets at least: the largest leave-one-out error (percent) of the fitted
    rows that lie outside the others' reach, and those rows."""
    floor, outside = _floor(tuple(rows))
    return floor, list(outside)


@functools.lru_cache(maxsize=64)
def _floor(rows: Tuple[Residual, ...]) -> Tuple[float, Tuple[Residual, ...]]:
    # The rows' own geometry, the same for every configuration a planner or a sweep asks about: found once.
    outside = unreached([r for r in rows if r.fitted])
    return (max((abs(r.loo_error_pct) for r in outside), default=0.0), tuple(outside))


def _fmt(axis: str, value: float) -> str:
    if axis == "tile_headroom":
        return f"{100 * value:.0f}%"
    return f"{value:,.0f}"


def describe(rows: Sequence[Residual], point: Point, axes: Sequence[str]) -> str:
    """Each of ``axes`` with the value of ``point`` and the span the rows cover there:
    ``16 IPUs per replica (rows: 1, 4, 8)``."""
    parts = []
    for axis in axes:
        if axis == "framework":
            seen = sorted({r.framework for r in rows if r.framework})
            parts.append(f"framework {point.framework} (rows: {', '.join(seen)})")
            continue
        kind = point.elements_kind if axis == "elements" else ""
        same = [r for r in rows if axis != "elements" or r.elements_kind == kind]
        if axis == "tile_headroom":
            values = [r.tile_headroom for r in same if r.tile_headroom is not None]
            here = point.tile_headroom or 0.0
        else:
            values = [v for v in (_value(r.point, axis) for r in same) if v > 0]
            here = _value(point, axis)
        label = f"{kind} {LABELS[axis]}" if axis == "elements" else LABELS[axis]
        distinct = sorted(set(values))
        if not values:
            span = f"no row with {kind or axis}"
        elif len(distinct) <= 4:  # few values: name them, so a gap between them reads as one
            span = "rows: " + ", ".join(_fmt(axis, v) for v in distinct)
        else:
            span = f"rows: {_fmt(axis, min(values))}-{_fmt(axis, max(values))}"
        parts.append(f"{_fmt(axis, here)} {label} ({span})")
    return ", ".join(parts)
