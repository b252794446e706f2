"""Which stretches of one step the Gantt chart draws to scale and which it sums up.

At gradient accumulation 2048 a step holds tens of thousands of passes, each far narrower than a pixel; drawn to
scale they are noise. What a reader needs of them is the pipeline's ramp-up and ramp-down, where its bubbles are,
and the steady state between, which repeats one pattern. So the chart draws the first and the last few
micro-batches to scale and sums the middle up (each IPU's share of it per category). The same goes for a host
call, all-reduce or weight update that would squeeze the passes to slivers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Union

import numpy as np

from ipuexp.emulator.events import Event
from ipuexp.report.event_columns import Columns, runs

EDGE_MICRO_BATCHES = 2
"""Micro-batches drawn to scale at each end of a long step: the first ones' last passes (their backward on the
first stage) come once the pipeline is full, so the ramp-up and a steady cycle show, and the same at the end."""
SUM_ABOVE = 12
"""Steps with more micro-batches than this are summed up between their first and last EDGE_MICRO_BATCHES."""
LONG_SHARE = 0.3
"""A host call, or the all-reduce and weight update, longer than this share of the passes drawn beside it is
summed up too."""


@dataclass(frozen=True)
class Segment:
    start_s: float
    end_s: float
    summed: bool
    """True: drawn as each IPU's share of it per category, at a fixed width; False: to scale."""
    label: str = ""
    """What a summed segment holds."""

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


Events = Union[Sequence[Event], Columns]


def columns(events: Events) -> Columns:
    return events if isinstance(events, Columns) else Columns(events)


def micro_batches(events: Events) -> int:
    mb = columns(events).mb
    return int(mb.max()) + 1 if len(mb) else 0


def _max(x: np.ndarray) -> Optional[float]:
    return float(x.max()) if len(x) else None


def _min(x: np.ndarray) -> Optional[float]:
    return float(x.min()) if len(x) else None


def segments(events: Events) -> List[Segment]:
    """The step cut into stretches, in time order, covering it from 0 to its end."""
    c = columns(events)
    stop = c.start + c.dur
    passes = c.mb >= 0
    end = _max(stop)
    last = _max(stop[~c.of_kind("all_reduce", "weight_update")])
    first = _min(c.start[passes])  # after the host call
    n = max(int(c.mb.max()) + 1, 0) if len(c) else 0
    if end is None:
        end = 0.0
    if first is None:
        return [Segment(0.0, end, False)]
    shown: List[Segment] = []
    if n > SUM_ABOVE:
        head_end = float(stop[c.mb == EDGE_MICRO_BATCHES - 1].max())
        tail_start = float(c.start[c.mb == n - EDGE_MICRO_BATCHES].min())
        if tail_start > head_end:
            entry = int(c.stage[passes].min())  # micro-batches enter the pipeline here
            entering = passes & (c.stage == entry) & c.of_kind("fwd") & (c.start >= head_end)
            entered = int(c.mb[entering].min()) if entering.any() else 0
            between = f"{entered:,}-{n - EDGE_MICRO_BATCHES - 1:,}"
            shown = [Segment(first, head_end, False),
                     Segment(head_end, tail_start, True, f"steady state:\nmicro-batches\n{between} enter"),
                     Segment(tail_start, last, False)]
    if not shown:
        shown = [Segment(first, last, False)]
    if first > 0:
        if first > LONG_SHARE * shown[0].duration_s:
            shown.insert(0, Segment(0.0, first, True, "host call"))
        else:
            shown[0] = Segment(0.0, shown[0].end_s, False)
    if end > last:
        if end - last > LONG_SHARE * shown[-1].duration_s:
            shown.append(Segment(last, end, True, "all-reduce, weight update"))
        else:
            shown[-1] = Segment(shown[-1].start_s, end, False)
    return shown


def shares(events: Events, segment: Segment) -> Dict[int, Dict[str, float]]:
    """Each IPU's share of ``segment`` per category (what is left of 1 is idle)."""
    c = columns(events)
    span = segment.duration_s or 1.0
    a = np.maximum(c.start, segment.start_s)
    b = np.minimum(c.start + c.dur, segment.end_s)
    inside = np.flatnonzero(b > a)
    part = (b[inside] - a[inside]) / span
    ipu, cat = c.ipu[inside], c.cat[inside]
    out: Dict[int, Dict[str, float]] = {}
    # Each sum added up one event after another, as a loop over the events would: cumsum accumulates in order
    # (np.sum pairs terms up and rounds differently).
    for run in runs(ipu * len(c.kinds) + cat):
        out.setdefault(int(ipu[run[0]]), {})[c.kinds[cat[run[0]]]] = float(np.cumsum(part[run])[-1])
    return out

