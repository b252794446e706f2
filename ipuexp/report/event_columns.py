"""A step's events as numpy columns: the trace and the Gantt chart run over hundreds of thousands of events, and
loops over arrays cost a small part of loops over the events."""
from __future__ import annotations

from typing import List, Sequence, Union

import numpy as np

from ipuexp.emulator.events import Event, EventRows


class _Codes(dict):
    def __missing__(self, key: str) -> int:
        code = self[key] = len(self)
        return code


class Columns:
    """The events' fields as arrays, in the events' order. ``cat`` holds codes into ``kinds`` (the categories in
    order of first appearance). From ``EventRows`` (as the simulation writes them) or from ``Event`` objects."""

    def __init__(self, events: Union[Sequence[Event], EventRows]):
        self._source = events
        if isinstance(events, EventRows):
            self._of_rows(events)
            return
        n = len(events)
        codes = _Codes()
        self.cat = np.fromiter(map(codes.__getitem__, [e.category for e in events]), np.int64, n)
        self.kinds: List[str] = list(codes)
        self.ipu = np.fromiter([e.ipu for e in events], np.int64, n)
        self.start = np.array([e.start_s for e in events], dtype=np.float64)
        self.dur = np.array([e.duration_s for e in events], dtype=np.float64)
        self.stage = np.fromiter([e.stage for e in events], np.int64, n)
        self.mb = np.fromiter([e.micro_batch for e in events], np.int64, n)
        self.index = np.arange(n)
        """Each event's position in the events it was made from."""

    def _of_rows(self, rows: EventRows) -> None:
        self.part = np.array(rows.part, dtype=np.int64)
        codes = _Codes()
        code_of_part = np.full(len(rows.parts) + 1, -1, dtype=np.int64)
        if len(self.part):
            found, first = np.unique(self.part, return_index=True)
            for p in found[np.argsort(first)].tolist():  # the categories in order of first appearance
                code_of_part[p] = codes[rows.parts[p][2]]
        self.cat = code_of_part[self.part]
        self.kinds = list(codes)
        self.ipu = np.array(rows.ipu, dtype=np.int64)
        self.start = np.array(rows.start, dtype=np.float64)
        self.dur = np.array(rows.duration, dtype=np.float64)
        self.stage = np.array(rows.stage, dtype=np.int64)
        self.mb = np.array(rows.micro_batch, dtype=np.int64)
        self.index = np.arange(len(self.part))

    def names(self, at: np.ndarray) -> List[str]:
        """The names of the events at positions ``at``."""
        source = self._source
        if not isinstance(source, EventRows):
            return [source[i].name for i in self.index[at].tolist()]
        return list(map(source.name, self.part[at].tolist(), self.mb[at].tolist()))

    def __len__(self) -> int:
        return len(self.start)

    def where(self, mask: np.ndarray) -> "Columns":
        if mask.all():
            return self
        out = object.__new__(Columns)
        out.kinds, out._source = self.kinds, self._source
        for name in ("cat", "ipu", "start", "dur", "stage", "mb", "index", "part"):
            if hasattr(self, name):
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
