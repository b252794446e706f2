"""Which stretches of one step the Gantt chart draws to scale and which it sums up.

At gradient accumulation 2048 a step holds tens of thousands of passes, each far narrower than a pixel; drawn to
scale they are noise. What a reader needs of them is the pipeline's ramp-up and ramp-down, where its bubbles are,
and the steady state between, which repeats one pattern. So the chart draws the first and the last few
micro-batches to scale and sums the middle up (each IPU's share of it per category). The same goes for a host
call, all-reduce or weight update that would squeeze the passes to slivers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence

from ipuexp.emulator.pipeline import Event

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


def micro_batches(events: Sequence[Event]) -> int:
    return max((e.micro_batch for e in events), default=-1) + 1


def segments(events: Sequence[Event]) -> List[Segment]:
    """The step cut into stretches, in time order, covering it from 0 to its end."""
    # One pass for the ends (the same maxima and minima as max() and min() over the events: hundreds of thousands).
    end = last = first = None
    n = 0
    for e in events:
        stop = e.start_s + e.duration_s
        if end is None or stop > end:
            end = stop
        if e.category not in ("all_reduce", "weight_update") and (last is None or stop > last):
            last = stop
        if e.micro_batch >= 0:
            if first is None or e.start_s < first:
                first = e.start_s  # after the host call
            if e.micro_batch >= n:
                n = e.micro_batch + 1
    if end is None:
        end = 0.0
    if first is None:
        return [Segment(0.0, end, False)]
    passes = [e for e in events if e.micro_batch >= 0]
    shown: List[Segment] = []
    if n > SUM_ABOVE:
        head_end = max(e.start_s + e.duration_s for e in passes if e.micro_batch == EDGE_MICRO_BATCHES - 1)
        tail_start = min(e.start_s for e in passes if e.micro_batch == n - EDGE_MICRO_BATCHES)
        if tail_start > head_end:
            entry = min(e.stage for e in passes)  # micro-batches enter the pipeline here
            entered = min((e.micro_batch for e in passes
                           if e.stage == entry and e.category == "fwd" and e.start_s >= head_end), default=0)
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


def shares(events: Sequence[Event], segment: Segment) -> Dict[int, Dict[str, float]]:
    """Each IPU's share of ``segment`` per category (what is left of 1 is idle)."""
    out: Dict[int, Dict[str, float]] = {}
    span = segment.duration_s or 1.0
    lo, hi = segment.start_s, segment.end_s
    for e in events:  # max() and min() of two floats, written out (hundreds of thousands of events)
        a = e.start_s
        b = a + e.duration_s
        if lo > a:
            a = lo
        if hi < b:
            b = hi
        if b > a:
            cats = out.setdefault(e.ipu, {})
            cats[e.category] = cats.get(e.category, 0.0) + (b - a) / span
    return out
