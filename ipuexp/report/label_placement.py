"""Labels beside scatter points that overlap neither each other nor the markers: each label takes the first of a
ring of offsets around its point that is free, nearest rings first (what adjustText does by repulsion, done by
trying a few places)."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

Box = Tuple[float, float, float, float]
"""x0, y0, x1, y1 in points."""

DIRECTIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1), (0, 1), (0, -1), (1, 0), (-1, 0))
"""Upper right first, then the other corners, then straight above, below and to the sides."""


def _overlap(a: Box, b: Box) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def _nearer_elsewhere(box: Box, own: Tuple[float, float], points: Sequence[Tuple[float, float]]) -> int:
    """How many other labelled points are nearer the label's centre than its own point."""
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2

    def d2(p: Tuple[float, float]) -> float:
        return (p[0] - cx) ** 2 + (p[1] - cy) ** 2

    mine = d2(own)
    return sum(1 for p in points if p != own and d2(p) < mine)


def _box(x: float, y: float, dx: float, dy: float, w: float, h: float) -> Box:
    """The box of a label of size w x h whose nearest corner (or edge centre) sits at offset (dx, dy)."""
    left = x + dx if dx > 0 else (x + dx - w if dx < 0 else x - w / 2)
    bottom = y + dy if dy > 0 else (y + dy - h if dy < 0 else y - h / 2)
    return (left, bottom, left + w, bottom + h)


def _outside(box: Box, bounds: Optional[Box]) -> float:
    if bounds is None:
        return 0.0
    w, h = box[2] - box[0], box[3] - box[1]
    return w * h - _overlap(box, bounds)


def place(points: Sequence[Tuple[float, float]], sizes: Sequence[Tuple[float, float]],
          obstacles: Sequence[Tuple[float, float]], marker: float = 4.0, gap: float = 3.0,
          rings: int = 4, bounds: Optional[Box] = None) -> List[Tuple[float, float, str, str]]:
    """Offsets for labels of ``sizes`` (w, h) at ``points``, all in points (1/72 in) of the figure.

    ``obstacles`` are the centres of every marker drawn (``marker`` points wide); ``bounds`` is the plotting
    area, outside which a label would be cut off. Returns, per label, its offset from its point and the
    horizontal and vertical alignment that put the label's nearest corner there; a label with no free place
    takes the one that overlaps least."""
    half = marker / 2
    clear = half + gap  # markers keep a margin, so that a label never seems to belong to its neighbour
    taken: List[Box] = [(x - clear, y - clear, x + clear, y + clear) for x, y in obstacles]
    out = []
    for (x, y), (w, h) in zip(points, sizes):
        best, best_cost = None, float("inf")
        for ring in range(1, rings + 1):
            r = half + gap * ring
            for ux, uy in DIRECTIONS:
                box = _box(x, y, ux * r, uy * r, w, h)
                cost = (sum(_overlap(box, t) for t in taken) + _nearer_elsewhere(box, (x, y), points) * w * h
                        + 2 * _outside(box, bounds))
                if cost < best_cost:
                    best, best_cost = (ux * r, uy * r, box), cost
                if cost == 0:
                    break
            if best_cost == 0:
                break
        dx, dy, box = best
        taken.append(box)
        ha = "left" if dx > 0 else ("right" if dx < 0 else "center")
        va = "bottom" if dy > 0 else ("top" if dy < 0 else "center")
        out.append((dx, dy, ha, va))
    return out
