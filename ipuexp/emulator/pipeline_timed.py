"""The pipeline's time without events (``pipeline.simulate``), from tables built once per pipeline shape.

Which passes run in which cycle depends only on the shape of the pipeline (schedule, micro-batches, each stage's
IPU), not on the seconds of the passes. So the cycles a simulation visits, the passes each IPU runs in each of
them and the cycles a wait looks back over are tabled once per shape (``_shape``); a simulation then sums each
distinct set of passes of an IPU and each distinct cycle once, over numpy arrays, and walks the visits.

Every float is the one the cycle-by-cycle simulation makes, by the same operations in the same order:
``numpy.add.accumulate`` adds sequentially, and a part the simulation leaves out (a pass of zero seconds, a
category a cycle does not touch, a pass that sends nothing) adds 0.0 here, which changes no sum.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

import numpy as np

from ipuexp.execution.schedule import FWD, slots, total_cycles

CATEGORIES = ("compute", "recompute", "exchange", "host_io")
_EXCHANGE = 2
# The parts of each pass in execution order: a forward's host IO (stage 0 only), compute and exchange; a backward's
# recomputation, compute and exchange. Part ``3 p + j`` of ``values`` is part j of pass p (``2 s``: stage s
# forward, ``2 s + 1``: its backward).


@dataclass(frozen=True)
class _Shape:
    ipus: Tuple[int, ...]
    total_cycles: int
    group_ipu: np.ndarray
    """Per distinct (IPU, passes it runs in a cycle): the IPU's position in ``ipus`` ..."""
    group_parts: np.ndarray
    """... the indices of its slots' parts' seconds in execution order (a slot that does not run: a 0.0), per slot
    three ..."""
    group_forward: np.ndarray
    """... whether each slot is a forward (its first part host IO, else recomputation) ..."""
    group_sends: np.ndarray
    """... and the indices of its passes' bytes sent (padded likewise)."""
    member_cycle: np.ndarray
    """For each (distinct cycle, group it runs): the cycle ..."""
    member_group: np.ndarray
    """... and the group."""
    cycles: int
    """Distinct cycles (by the groups they run)."""
    visit_cycle: np.ndarray
    """Per visit of ``pipeline.simulate_rows``'s walk: its distinct cycle, the micro-batch its first-stage forward
    starts (-1: none) and the distinct cycles its wait looks back over (padded with ``cycles``)."""
    visit_mb: np.ndarray
    visit_back: np.ndarray
    visit_times: np.ndarray
    """Times each visit's busy seconds count."""
    blocks: Tuple[Tuple[int, int, int], ...]
    """(repetitions, first visit, end): runs of visits each counted once (0), or a period counted that often."""


def _distinct(rows: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The first row of each distinct value of ``rows`` (booleans) and each row's index among them."""
    if rows.shape[1] <= 62:  # rows as bit patterns
        codes = rows.astype(np.int64) @ np.left_shift(1, np.arange(rows.shape[1], dtype=np.int64))
        _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
        return first, inverse.ravel()
    ids: Dict[bytes, int] = {}
    first_rows: List[int] = []
    inverse_rows = []
    for i, row in enumerate(map(bytes, rows.astype(np.uint8))):
        j = ids.setdefault(row, len(ids))
        if j == len(first_rows):
            first_rows.append(i)
        inverse_rows.append(j)
    return np.array(first_rows, dtype=np.int64), np.array(inverse_rows, dtype=np.int64)


def _padded(rows: List[List[int]], pad: int) -> np.ndarray:
    width = max((len(r) for r in rows), default=0)
    return np.array([r + [pad] * (width - len(r)) for r in rows], dtype=np.int64).reshape(len(rows), width)


@functools.lru_cache(maxsize=2048)
def _shape(schedule: str, training: bool, micro_batches: int, stage_ipus: Tuple[int, ...]) -> _Shape:
    n_stages, n = len(stage_ipus), micro_batches
    cycle_slots, period = slots(schedule, n_stages, training)
    first = next(s for s in cycle_slots if s.stage == 0 and s.phase == FWD)
    ipus = tuple(sorted(set(stage_ipus)))
    position = {ipu: p for p, ipu in enumerate(ipus)}
    total = total_cycles(cycle_slots, n)
    points = sorted({0, total} | {min(s.offset, total) for s in cycle_slots}
                    | {min(s.offset + s.stride * n, total) for s in cycle_slots})
    # The visits of ``pipeline.simulate_rows``: a segment's first period, one period standing for its repetitions, the
    # rest.
    blocks: List[Tuple[int, List[int]]] = []
    for a, b in zip(points, points[1:]):
        head = min(b - a, period)
        reps = (b - a - head) // period if b - a - head > period else 0
        blocks.append((0, list(range(a, a + head))))
        start = a + head
        if reps:
            blocks.append((reps, list(range(start, start + period))))
            start += reps * period
        blocks.append((0, list(range(start, b))))

    def first_mb(c: int) -> int:
        d = c - first.offset
        return -1 if d < 0 or d % first.stride or d // first.stride >= n else d // first.stride

    visited = [c for _, cs in blocks for c in cs]
    back = {c: range(c - first.stride, c) for c in set(visited) if first_mb(c) > 0}
    needed = np.array(sorted(set(visited) | {x for r in back.values() for x in r}), dtype=np.int64)
    offset = np.array([s.offset for s in cycle_slots], dtype=np.int64)
    stride = np.array([s.stride for s in cycle_slots], dtype=np.int64)
    d = needed[:, None] - offset[None, :]
    on = (d >= 0) & (d % stride == 0) & (d // stride < n)
    first_rows, inverse = _distinct(on)
    distinct = on[first_rows]
    of_cycle = dict(zip(needed.tolist(), inverse.tolist()))
    # Each IPU's slots in execution order (padded with a slot that never runs); a group is an IPU and which of its
    # slots run. Its parts are those of all its slots, a slot that does not run adding 0.0 seconds.
    own = [[k for k, s in enumerate(cycle_slots) if position[stage_ipus[s.stage]] == p] for p in range(len(ipus))]
    width = max(len(ks) for ks in own)
    never = len(cycle_slots)
    slot_of = np.array([ks + [never] * (width - len(ks)) for ks in own], dtype=np.int64)
    runs = np.concatenate([distinct, np.zeros((len(distinct), 1), dtype=bool)], axis=1)[:, slot_of]
    # A group's key: its IPU (one-hot) and its slots that run.
    keys = np.concatenate([np.broadcast_to(np.eye(len(ipus), dtype=bool)[None], runs.shape[:2] + (len(ipus),)),
                           runs], axis=2).reshape(-1, len(ipus) + width)
    busy = runs.reshape(-1, width).any(axis=1)
    groups, member = _distinct(keys[busy])
    group_ipu = np.flatnonzero(busy)[groups] % len(ipus)
    bits = keys[busy][groups, len(ipus):]
    passes = np.array([2 * s.stage + (0 if s.phase == FWD else 1) for s in cycle_slots] + [0], dtype=np.int64)
    runs_pass = passes[slot_of[group_ipu]]  # (group, slot) -> pass
    parts = np.where(bits[:, :, None], 3 * runs_pass[:, :, None] + np.arange(3), 6 * n_stages)
    sends = np.where(bits, runs_pass, 2 * n_stages)
    spans, at = [], 0
    for reps, cs in blocks:
        if cs:
            spans.append((reps, at, at + len(cs)))
            at += len(cs)
    return _Shape(ipus=ipus, total_cycles=total, group_ipu=group_ipu,
                  group_parts=parts, group_forward=runs_pass % 2 == 0, group_sends=sends,
                  member_cycle=np.flatnonzero(busy) // len(ipus), member_group=member, cycles=len(distinct),
                  visit_cycle=np.array([of_cycle[c] for c in visited], dtype=np.int64),
                  visit_mb=np.array([first_mb(c) for c in visited], dtype=np.int64),
                  visit_back=_padded([[of_cycle[x] for x in back.get(c, ())] for c in visited], len(distinct)),
                  visit_times=np.array([reps or 1 for reps, cs in blocks for _ in cs], dtype=np.float64),
                  blocks=tuple(spans))


def _values(spec: Any) -> Tuple[np.ndarray, np.ndarray]:
    """Seconds of every part of every pass (``3 p + j``, then a 0.0) with those the simulation leaves out (not
    above 0) at 0.0, and the bytes each pass sends to a stage on another IPU (0.0: none), then a 0.0."""
    stages = {w.stage: w for w in spec.stages}
    seconds = [0.0] * (6 * len(stages) + 1)
    sends = [0.0] * (2 * len(stages) + 1)
    for st, w in stages.items():
        host = spec.io_exposed_s + (0.0 if spec.io_overlap else spec.io_s) if st == 0 else 0.0
        seconds[6 * st:6 * st + 6] = (host, w.fwd_compute, w.fwd_exchange, w.recompute, w.bwd_compute, w.bwd_exchange)
        nxt, prv = stages.get(st + 1), stages.get(st - 1)
        if nxt is not None and nxt.ipu != w.ipu:
            sends[2 * st] = w.send_fwd_bytes
        if prv is not None and prv.ipu != w.ipu:
            sends[2 * st + 1] = w.send_bwd_bytes
    values = np.array(seconds)
    return np.where(values > 0, values, 0.0), np.array(sends)


def _last(a: np.ndarray, axis: int) -> np.ndarray:
    """The sequential sums of ``a`` along ``axis`` (the last of ``numpy.add.accumulate``; 0.0 when empty)."""
    if a.shape[axis] == 0:
        return np.zeros(a.shape[:axis] + a.shape[axis + 1:])
    return np.take(np.add.accumulate(a, axis=axis), -1, axis=axis)


def timed(spec: Any) -> Tuple[float, int, Dict[int, Dict[str, float]]]:
    """(seconds, cycles, busy seconds per IPU and category) of ``spec`` (a ``pipeline.PipelineSpec``)."""
    stage_ipus = tuple(w.ipu for w in sorted(spec.stages, key=lambda w: w.stage))
    sh = _shape(spec.schedule, spec.training, spec.micro_batches, stage_ipus)
    seconds, sends = _values(spec)
    n_ipus = len(sh.ipus)
    # Each group: its seconds from 0 (all its parts in order), per category, and the bytes it sends.
    seq = seconds[sh.group_parts]
    span = _last(seq.reshape(len(seq), 3 * seq.shape[1]), 1)
    first, fwd = seq[:, :, 0], sh.group_forward
    own = np.stack([_last(seq[:, :, 1], 1), _last(np.where(fwd, 0.0, first), 1), _last(seq[:, :, 2], 1),
                    _last(np.where(fwd, first, 0.0), 1)], axis=1)  # CATEGORIES' order
    sent = _last(sends[sh.group_sends], 1)
    # Each distinct cycle: every IPU's busy seconds and the slowest IPU's end, then the barrier when multi-IPU.
    mc, mg = sh.member_cycle, sh.member_group
    busy = np.zeros((sh.cycles, n_ipus, 4))
    busy[mc, sh.group_ipu[mg]] = own[mg]
    end = np.zeros(sh.cycles)
    np.maximum.at(end, mc, span[mg])
    if n_ipus > 1:
        most = np.zeros(sh.cycles)
        np.maximum.at(most, mc, sent[mg])
        barrier = spec.sync_s + most / spec.link_bytes_per_s
        busy[:, :, _EXCHANGE] += barrier[:, None]
        end += barrier
    # Each visit: the cycle's time and the wait before it for its first-stage forward's input.
    io = spec.io_s if spec.io_overlap else 0.0
    gap = max(io, spec.host_period_s)
    wait = np.where(sh.visit_mb == 0, io, 0.0)
    if gap > 0:
        since = _last(np.append(end, 0.0)[sh.visit_back], 1)
        wait = np.where(sh.visit_mb > 0, np.maximum(0.0, gap - since), wait)
    step = (end[sh.visit_cycle] + wait).tolist()
    t = 0.0
    for reps, a, b in sh.blocks:
        if reps:
            one = 0.0
            for x in step[a:b]:
                one += x
            t += one * reps
        else:
            for x in step[a:b]:
                t += x
    if len(step):
        terms = busy.reshape(sh.cycles, n_ipus * 4)[sh.visit_cycle] * sh.visit_times[:, None]
        totals = np.add.accumulate(terms, axis=0)[-1].tolist()
    else:
        totals = [0.0] * (n_ipus * 4)
    return t, sh.total_cycles, {ipu: dict(zip(CATEGORIES, totals[4 * p:4 * p + 4]))
                                for p, ipu in enumerate(sh.ipus)}
