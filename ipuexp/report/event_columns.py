"""A step's events as numpy columns: the trace and the Gantt chart run over hundreds of thousands of events, and
loops over arrays cost a small part of loops over the events."""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from ipuexp.emulator.pipeline import Event


class _Codes(dict):
    def __missing__(self, key: str) -> int:
        code = self[key] = len(self)
        return code


class Columns:
    """The events' fields as arrays, in the events' order. ``cat`` holds codes into ``kinds`` (the categories in
    order of first appearance)."""

    def __init__(self, events: Sequence[Event]):
        n = len(events)
        codes = _Codes()
        self.cat = np.fromiter(map(codes.__getitem__, [e.category for e in events]), np.int64, n)
        self.kinds: List[str] = list(codes)
        self.ipu = np.fromiter([e.ipu for e in events], np.int64, n)
        self.start = np.array([e.start_s for e in events], dtype=np.float64)
        self.dur = np.array([e.duration_s for e in events], dtype=np.float64)
        self.stage = np.fromiter([e.stage for e in events], np.int64, n)
        self.mb = np.fromiter([e.micro_batch for e in events], np.int64, n)

    def __len__(self) -> int:
        return len(self.start)

    def where(self, mask: np.ndarray) -> "Columns":
        if mask.all():
            return self
        out = object.__new__(Columns)
        out.kinds = self.kinds
        for name in ("cat", "ipu", "start", "dur", "stage", "mb"):
            setattr(out, name, getattr(self, name)[mask])
        return out

    def of_kind(self, *kinds: str) -> np.ndarray:
        """Where the category is one of ``kinds``."""
        return np.array([k in kinds for k in self.kinds] + [False])[self.cat]

    def present(self, name: str) -> List[int]:
        """The distinct values of the small non-negative integer column ``name`` (IPU, category), sorted."""
        x = getattr(self, name)
        return np.flatnonzero(np.bincount(x)).tolist() if len(x) else []


def runs(groups: np.ndarray) -> List[np.ndarray]:
    """The positions of each distinct value of ``groups`` (small non-negative integers), in order, the groups in
    order of first appearance."""
    if not len(groups):
        return []
    small = groups.astype(np.int16) if groups.max() < 2 ** 15 else groups  # a stable radix sort
    order = np.argsort(small, kind="stable")
    found = np.split(order, np.flatnonzero(np.diff(small[order])) + 1)
    return sorted(found, key=lambda r: r[0])
