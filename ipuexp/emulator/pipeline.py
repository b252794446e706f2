"""Discrete-event simulation of one step's pipeline over micro-batches.

A pipelined program runs in pipeline cycles: in each cycle every IPU executes the stage passes due in it, then
all IPUs synchronise and copy the tensors crossing stage boundaries over the IPU-Links (so the longest IPU bounds
the cycle: IPU optimisation guide section 4.2; PopTorch pipelining tutorial, "the execution time of the longest
stage determines the duration of one step"). Which passes fall in which cycle is the schedule, and only
``ipuexp.execution.schedule`` knows it; this module times the cycles.

Ramp-up and ramp-down fall out of which passes are active. Between the cycles where a pass starts or ends its run
of micro-batches, the cycles repeat with the schedule's period, so each such segment is simulated for one period
and repeated exactly (``pipeline_timed``): the result equals cycle-by-cycle simulation
(``simulate_rows`` does that, writing the events the trace and the Gantt chart draw).
"""
from __future__ import annotations

import functools
from typing import Dict, List, Optional, Tuple

from ipuexp.emulator.events import EventRows
from ipuexp.emulator.pipeline_spec import CATEGORIES, PipelineResult, PipelineSpec, StageWork  # noqa: F401 (named here too)
from ipuexp.emulator.pipeline_timed import timed
from ipuexp.execution.schedule import FWD, Slot, active, slots, total_cycles


class _Simulator:
    def __init__(self, spec: PipelineSpec):
        self.spec = spec
        self.stages = {w.stage: w for w in spec.stages}
        self.n_stages = len(spec.stages)
        self.slots, self.period = slots(spec.schedule, self.n_stages, spec.training)
        self.first = next(s for s in self.slots if s.stage == 0 and s.phase == FWD)
        self.ipus = sorted({w.ipu for w in spec.stages})
        self.multi_ipu = len(self.ipus) > 1
        self.total_cycles = total_cycles(self.slots, spec.micro_batches)
        self._quiet: Dict[int, Tuple[float, Dict[int, Dict[str, float]]]] = {}
        """Cycles run from time 0 without events (a pure function of the cycle): each is run once."""
        self._parts: Optional[Tuple[Dict[int, Tuple], Dict[int, Tuple]]] = None
        self._slot_parts: Optional[List[Tuple[int, int, Tuple]]] = None
        """Each slot's offset, stride and ``_passes`` entry, in the slots' order."""
        self._ipu_sums: Dict[Tuple[int, ...], Tuple[float, Dict[str, float], Optional[float]]] = {}
        """One IPU's time, busy seconds and bytes sent in a quiet cycle, by the passes it runs."""
        self.event_parts = EventRows()
        """The names and categories of the events a cycle records (``_passes`` numbers its parts into it)."""
        self._sync = self.event_parts.add_part("sync + inter-IPU copy", "", "exchange", False)

    def active(self, c: int) -> List[Tuple[Slot, int]]:
        return active(self.slots, c, self.spec.micro_batches)

    def _first_stage_mb(self, c: int) -> int:
        """Micro-batch whose first-stage forward runs in cycle ``c`` (-1 if none)."""
        slot = self.first
        d = c - slot.offset
        if d < 0 or d % slot.stride or d // slot.stride >= self.spec.micro_batches:
            return -1
        return d // slot.stride

    def wait(self, c: int) -> float:
        """Time all IPUs wait before cycle ``c`` for the input of its first-stage forward. The host prepares one
        micro-batch per ``host_period_s`` and IO tiles receive one per ``io_s`` while the previous one is
        processed, so two first-stage forwards start at least that far apart; the first input of the step
        arrives before it starts (IO tiles) or is prepared during the host call."""
        mb = self._first_stage_mb(c)
        if mb < 0:
            return 0.0
        io = self.spec.io_s if self.spec.io_overlap else 0.0
        if mb == 0:
            return io
        gap = max(io, self.spec.host_period_s)
        if gap <= 0:
            return 0.0
        # The cycles since the previous first-stage forward hold no first-stage forward: no waits of their own.
        since = sum(self.quiet(x)[0] for x in range(c - self.first.stride, c))
        return max(0.0, gap - since)

    def quiet(self, c: int) -> Tuple[float, Dict[int, Dict[str, float]]]:
        """``fast_cycle(c, 0.0, None)``, run once per cycle (its busy seconds are shared: read them, never change them)."""
        got = self._quiet.get(c)
        if got is None:
            got = self._quiet[c] = self._quiet_cycle(c)
        return got

    def _passes(self) -> Tuple[Dict[int, Tuple], Dict[int, Tuple]]:
        """Per stage, forward and backward: its IPU, what it runs in ``cycle``'s order as (category, seconds, event
        name before and after the micro-batch, event category, the event's part in ``event_parts``; those of zero
        seconds left out, as ``cycle`` leaves them out) and the bytes it sends to a stage on another IPU."""
        spec, fwd, bwd = self.spec, {}, {}
        table = self.event_parts

        def numbered(parts: List[Tuple]) -> Tuple[Tuple, ...]:
            return tuple((*p, table.add_part(p[2], p[3], p[4], True)) for p in parts if p[1] > 0)

        for st, w in self.stages.items():
            parts = []
            if st == 0:
                io = spec.io_exposed_s + (0.0 if spec.io_overlap else spec.io_s)
                parts.append(("host_io", io, "host IO mb", "", "host_io"))
            parts += [("compute", w.fwd_compute, f"F{st} mb", "", "fwd"),
                      ("exchange", w.fwd_exchange, f"F{st} mb", " exchange", "exchange")]
            nxt = self.stages.get(st + 1)
            fwd[st] = (w.ipu, numbered(parts),
                       w.send_fwd_bytes if nxt is not None and nxt.ipu != w.ipu else None)
            parts = [("recompute", w.recompute, f"R{st} mb", "", "recompute"),
                     ("compute", w.bwd_compute, f"B{st} mb", "", "bwd"),
                     ("exchange", w.bwd_exchange, f"B{st} mb", " exchange", "exchange")]
            prv = self.stages.get(st - 1)
            bwd[st] = (w.ipu, numbered(parts),
                       w.send_bwd_bytes if prv is not None and prv.ipu != w.ipu else None)
        return fwd, bwd

    def _quiet_cycle(self, c: int) -> Tuple[float, Dict[int, Dict[str, float]]]:
        """``fast_cycle(c, 0.0, None)``, each IPU's share looked up by the passes it runs: an IPU's sums depend
        only on its own passes, and through a pipeline's fill and drain each IPU runs a handful of distinct sets
        while the cycles, all different, combine them."""
        if self._slot_parts is None:
            if self._parts is None:
                self._parts = self._passes()
            fwd, bwd = self._parts
            self._slot_parts = [(sl.offset, sl.stride, (fwd if sl.phase == FWD else bwd)[sl.stage])
                                for sl in self.slots]
        n = self.spec.micro_batches
        on: Dict[int, List[Tuple]] = {}
        for offset, stride, entry in self._slot_parts:  # ``active(c)``, in its order
            d = c - offset
            if d >= 0 and d % stride == 0 and d // stride < n:
                group = on.get(entry[0])
                if group is None:
                    on[entry[0]] = [entry]
                else:
                    group.append(entry)
        busy: Dict[int, Dict[str, float]] = {}
        end, most = 0.0, 0.0
        memo = self._ipu_sums
        for ipu, entries in on.items():
            key = (ipu, *map(id, entries))
            got = memo.get(key)
            if got is None:
                got = memo[key] = _ipu_sums(entries)
            t, own, sent = got
            busy[ipu] = own
            if t > end:
                end = t
            if sent is not None and sent > most:
                most = sent
        if self.multi_ipu:
            spec = self.spec
            barrier = spec.sync_s + most / spec.link_bytes_per_s
            for i in self.ipus:
                own = busy.get(i)
                busy[i] = {"exchange": barrier} if own is None else {**own, "exchange": own.get("exchange", 0.0)
                                                                     + barrier}
            end += barrier
        return end, busy

    def fast_cycle(self, c: int, t0: float, events: Optional[EventRows]
                   ) -> Tuple[float, Dict[int, Dict[str, float]]]:
        """``cycle`` from tables built once per simulation: the same sums in the same order (so the same floats) and
        the same events (added to ``events``, whose parts are ``event_parts``)."""
        if self._parts is None:
            self._parts = self._passes()
        fwd, bwd = self._parts
        if events is not None:
            add_ipu, add_part, add_start = events.ipu.append, events.part.append, events.start.append
            add_duration, add_stage, add_mb = events.duration.append, events.stage.append, events.micro_batch.append
        # Only what a cycle touches is held (an IPU's categories start at 0.0 when first added to, so every sum is
        # the one a full table of zeros gives, in the same order).
        busy: Dict[int, Dict[str, float]] = {}
        clock: Dict[int, float] = {}
        sent: Dict[int, float] = {}
        for slot, mb in self.active(c):
            stage = slot.stage
            ipu, parts, send = (fwd if slot.phase == FWD else bwd)[stage]
            own = busy.get(ipu)
            if own is None:
                own = busy[ipu] = {}
            t = clock.get(ipu, t0)
            if events is None:
                for category, seconds, _, _, _, _ in parts:
                    own[category] = own.get(category, 0.0) + seconds
                    t += seconds
            else:
                for category, seconds, _, _, _, part in parts:
                    own[category] = own.get(category, 0.0) + seconds
                    add_ipu(ipu)
                    add_part(part)
                    add_start(t)
                    add_duration(seconds)
                    add_stage(stage)
                    add_mb(mb)
                    t += seconds
            clock[ipu] = t
            if send is not None:
                sent[ipu] = sent.get(ipu, 0.0) + send
        end = max(clock.values(), default=t0)
        if self.multi_ipu:
            spec = self.spec
            barrier = spec.sync_s + max(sent.values(), default=0.0) / spec.link_bytes_per_s
            for i in self.ipus:
                own = busy.get(i)
                if own is None:
                    own = busy[i] = {}
                own["exchange"] = own.get("exchange", 0.0) + barrier
                if events is not None and barrier > 0:
                    events.add(i, self._sync, end, barrier)
            end += barrier
        return end - t0, busy


def _ipu_sums(entries: List[Tuple]) -> Tuple[float, Dict[str, float], Optional[float]]:
    """One IPU's passes of a quiet cycle (``_passes`` entries, in the cycle's order): its time from 0, its seconds by
    category and the bytes it sends (None: none), summed as ``fast_cycle`` sums them."""
    own: Dict[str, float] = {}
    t = 0.0
    sent: Optional[float] = None
    for _, parts, send in entries:
        for category, seconds, _, _, _, _ in parts:
            own[category] = own.get(category, 0.0) + seconds
            t += seconds
        if send is not None:
            sent = (0.0 if sent is None else sent) + send
    return t, own, sent


def simulate(spec: PipelineSpec, record_events: bool = False) -> PipelineResult:
    """Time of the pipeline phase of one step (all micro-batches through all stages). Without events the result
    is memoised on the (immutable) spec, which fits and planners meet again and again: read it, never change it.
    With them, ``events`` holds one object per event (``simulate_rows`` gives them as columns)."""
    if not record_events:
        return _timed(spec)
    out = simulate_rows(spec)
    out.events = out.rows.events()
    return out


@functools.lru_cache(maxsize=4096)
def _timed(spec: PipelineSpec) -> PipelineResult:
    return PipelineResult(*timed(spec))


def simulate_rows(spec: PipelineSpec) -> PipelineResult:
    """Cycle by cycle, with the events as columns in ``rows`` (the time alone: ``pipeline_timed``, which walks the
    same cycles)."""
    sim = _Simulator(spec)
    totals = {i: dict.fromkeys(CATEGORIES, 0.0) for i in sim.ipus}
    sim._parts = sim._passes()
    events = EventRows(parts=sim.event_parts.parts)
    t = 0.0
    for c in range(sim.total_cycles):
        t += sim.wait(c)
        dt, busy = sim.fast_cycle(c, t, events)
        for i, cats in busy.items():
            for k, v in cats.items():
                totals[i][k] += v
        t += dt
    return PipelineResult(t, sim.total_cycles, totals, rows=events)
