"""The order in which one replica runs the forward and backward passes of its micro-batches, per schedule.

A pipeline of S stages runs in clock cycles; in each cycle every stage may work on a different micro-batch. The
functional engine runs one event at a time, in the order the cycles put them, so activations really wait in
each stage's stash for as long as the schedule keeps them there:

* grouped (PopTorch/TF default): PopART's pipeline has 2S - 1 pipeline stages, forward stages 0..S-1 then
  backward stages S-2..0, the last stage running its forward and backward together ([git]
  poptorch popart_compiler CompilerImpl.cpp; ``poptorch.Options``, PopTorch user guide). Micro-batch m
  is in pipeline stage p at cycle m + p; in a cycle all IPUs run their forward, then their backward. Stage s
  stashes 2(S - 1 - s) + 1 micro-batches: 2N + 1 on the first IPU and 2(N - 1) + 1 on the second, N = S - 1
  (IPU optimisation guide, section 4.2, "Grouped scheduling requires storing").
* interleaved: each stage alternates one forward and one backward once its pipeline is full (stage s first
  runs S - 1 - s forwards), so it stashes S - s micro-batches: N + 1 on the first IPU (IPU optimisation guide,
  section 4.2, "Interleaved scheduling requires storing N+1 FIFOs").
* sequential (``ShardedExecution``): one micro-batch at a time through every stage, forward then backward
  (TF2 IPU guide, section 3.2; PopTorch pipelining tutorial, "Sharded execution (sequential)").

Every schedule runs the backward passes of a stage in micro-batch order, so gradients are accumulated in the
same order and all schedules produce the same weights.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

SCHEDULES = ("grouped", "interleaved", "sequential")

FWD = "fwd"
BWD = "bwd"


@dataclass(frozen=True)
class Event:
    """One pass of one micro-batch through one stage."""

    phase: str
    """fwd or bwd."""
    stage: int
    """Pipeline stage index."""
    micro_batch: int
    """Micro-batch index within the weight update."""


def events(schedule: str, num_stages: int, micro_batches: int, training: bool = True) -> List[Event]:
    """Every event of one weight update (training) or of ``micro_batches`` forward passes, in execution order."""
    if schedule not in SCHEDULES:
        raise ValueError(f"options.pipeline.schedule: {schedule!r} is not allowed; allowed: {', '.join(SCHEDULES)}")
    if num_stages < 1 or micro_batches < 1:
        raise ValueError(f"a pipeline needs at least one stage and one micro-batch, got {num_stages} stages "
                         f"and {micro_batches} micro-batches")
    if schedule == "sequential":
        return _sequential(num_stages, micro_batches, training)
    if not training:
        return _forward_pipeline(num_stages, micro_batches)
    if schedule == "grouped":
        return _grouped(num_stages, micro_batches)
    return _interleaved(num_stages, micro_batches)


def _sequential(s: int, m: int, training: bool) -> List[Event]:
    out: List[Event] = []
    for mb in range(m):
        out.extend(Event(FWD, st, mb) for st in range(s))
        if training:
            out.extend(Event(BWD, st, mb) for st in reversed(range(s)))
    return out


def _forward_pipeline(s: int, m: int) -> List[Event]:
    """Inference: micro-batch mb is in stage st at cycle mb + st."""
    return [Event(FWD, st, t - st) for t in range(m + s - 1) for st in range(s) if 0 <= t - st < m]


def _grouped(s: int, m: int) -> List[Event]:
    out: List[Event] = []
    last_pipeline_stage = 2 * s - 2
    for t in range(m + last_pipeline_stage):
        out.extend(Event(FWD, st, t - st) for st in range(s) if 0 <= t - st < m)
        # backward of stage st is pipeline stage 2S - 2 - st; the last stage's backward shares its forward's cycle
        out.extend(Event(BWD, st, t - (last_pipeline_stage - st)) for st in reversed(range(s))
                   if 0 <= t - (last_pipeline_stage - st) < m)
    return out


def _interleaved(s: int, m: int) -> List[Event]:
    # Per-stage programme: warm-up forwards, then one forward and one backward in turn, then the last backwards.
    programmes: List[List[Event]] = []
    for st in range(s):
        warm = min(s - 1 - st, m)
        ops = [Event(FWD, st, i) for i in range(warm)]
        for i in range(m - warm):
            ops += [Event(FWD, st, warm + i), Event(BWD, st, i)]
        ops += [Event(BWD, st, i) for i in range(m - warm, m)]
        programmes.append(ops)
    # Clocked execution: in a cycle each stage runs its next event if what it needs finished in an earlier cycle
    # (a boundary tensor crosses IPUs between cycles).
    done: Dict[Tuple[str, int, int], bool] = {}
    cursor = [0] * s
    out: List[Event] = []
    while any(cursor[st] < len(programmes[st]) for st in range(s)):
        ready = []
        for st in range(s):
            if cursor[st] == len(programmes[st]):
                continue
            ev = programmes[st][cursor[st]]
            if ev.phase == FWD:
                ok = st == 0 or (FWD, st - 1, ev.micro_batch) in done
            else:
                ok = st == s - 1 or (BWD, st + 1, ev.micro_batch) in done
            if ok:
                ready.append(ev)
        if not ready:  # cannot happen for a well-formed programme; guards against an endless loop
            raise RuntimeError("interleaved schedule deadlocked")
        for ev in ready:
            out.append(ev)
            cursor[ev.stage] += 1
        for ev in ready:
            done[(ev.phase, ev.stage, ev.micro_batch)] = True
    return out


def max_in_flight(order: List[Event], stage: int) -> int:
    """Most micro-batches whose forward has run on ``stage`` but whose backward has not (its stash depth)."""
    live = peak = 0
    for ev in order:
        if ev.stage != stage:
            continue
        live += 1 if ev.phase == FWD else -1
        peak = max(peak, live)
    return peak
