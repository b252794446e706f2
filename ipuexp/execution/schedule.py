"""The pipeline schedules: the one place that knows when each stage runs each micro-batch.

A pipeline of S stages runs in clock cycles; in a cycle every stage may work on a different micro-batch, then all
IPUs synchronise and copy the tensors crossing stage boundaries. A schedule is a set of *slots*: stage ``s`` runs
the forward (or backward) pass of micro-batch ``m`` in cycle ``stride * m + offset``. Within a cycle an IPU runs
its forwards in stage order, then its backwards in reverse stage order. Everything else is derived from the slots:

* the execution order of one weight update (``events``), which the functional engine runs one event at a time;
* the micro-batches a stage holds between its forward and its backward (``stash_depth``), which sizes the memory
  model's stash FIFOs;
* the cycles the timing model simulates (``slots``, ``period``).

The schedules (IPU optimisation guide section 4.2; TF2 IPU guide section 3.2; PopTorch pipelining tutorial):

* grouped (PopTorch and TensorFlow default): PopART's pipeline has 2S - 1 pipeline stages, the forward stages
  0..S-1 then the backward stages S-2..0, the last stage running its forward and backward in one cycle. Micro-batch
  m runs forward on stage s in cycle m + s and backward in cycle m + 2S - 2 - s.
* interleaved (TensorFlow's alone: PopTorch and PopART have no such schedule, ``config.options.schedules_for``):
  one pass per stage per cycle, forwards and backwards alternating (forward of m on stage s in cycle
  2m + s, backward in cycle 2m + 2S - 1 - s), so a backward runs on some stage in every cycle.
* sequential (sharded execution): one micro-batch at a time through every stage, forward then backward.
* a single stage (one IPU, no pipeline) is grouped with S = 1; inference runs the forward slots only.

Stash depth, settled. The IPU optimisation guide (section 4.2) says grouped scheduling stores "2N+1 activations
in FIFOs on the first IPU, 2(N-1)+1 on the second" and interleaved "N+1 FIFOs", without defining N. PopART's
pipeline transform, which implements the grouped schedule for PopTorch and PopART (graphcore/popart
``willow/src/transforms/pipeline.cpp``), says what N is: running Fwd/Stash/Restore/Bwd in a cycle results "in a
stash size of 2*(IPUs to end) + 1, except for the last IPU, which has no stash". For stage s of S the IPUs to the
end number S - 1 - s, so N = S - 1 on the first IPU: depths 2(S - 1 - s) + 1, i.e. [7, 5, 3, 1] for four stages
(the last stage's entry is its live micro-batch, held from its forward to its backward in the same cycle). The
slots give the same count: stage s holds micro-batch m from cycle m + s to cycle m + 2S - 2 - s, forward before
backward in a cycle, so 2(S - 1 - s) + 1 micro-batches are live at once. Interleaved with N = S - 1 stores N + 1
= S on the first IPU and S - s on stage s ([4, 3, 2, 1]); sequential holds one. ``stash_depth`` counts this
from the slots, and the functional engine, running ``events``, measures the same numbers (a test checks both).

Recomputation (IPU optimisation guide section 5.3): PopTorch turns ``pipeline`` recomputation on only for
pipelined (multi-stage) graphs (``poptorch.Options``: RecomputationType::Pipeline with more than one IPU);
``all`` (PopART RecomputeAll) applies to any graph. With it, a stage stashes only its recomputation checkpoints.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import List, Tuple

SCHEDULES = ("grouped", "interleaved", "sequential")

FWD = "fwd"
BWD = "bwd"


@dataclass(frozen=True)
class Slot:
    """Stage ``stage`` runs the ``phase`` pass of micro-batch m in cycle ``stride * m + offset``."""

    stage: int
    phase: str
    """fwd or bwd."""
    offset: int
    stride: int


@dataclass(frozen=True)
class Event:
    """One pass of one micro-batch through one stage."""

    phase: str
    """fwd or bwd."""
    stage: int
    """Pipeline stage index."""
    micro_batch: int
    """Micro-batch index within the weight update (or the host call, for inference)."""


def _order(slot: Slot) -> Tuple[int, int]:
    """Within a cycle an IPU runs its forwards in stage order, then its backwards in reverse stage order."""
    return (0, slot.stage) if slot.phase == FWD else (1, -slot.stage)


def slots(schedule: str, num_stages: int, training: bool) -> Tuple[List[Slot], int]:
    """The slots of every stage pass in execution order within a cycle, and the schedule's period in cycles.

    ``schedule`` is one of SCHEDULES (validated with the config)."""
    assert schedule in SCHEDULES and num_stages >= 1, (schedule, num_stages)
    s = num_stages
    out: List[Slot] = []
    if schedule == "sequential":
        period = 2 * s if training else s
        for st in range(s):
            out.append(Slot(st, FWD, st, period))
            if training:
                out.append(Slot(st, BWD, 2 * s - 1 - st, period))
    elif schedule == "interleaved" and training:
        period = 2
        for st in range(s):
            out += [Slot(st, FWD, st, 2), Slot(st, BWD, 2 * s - 1 - st, 2)]
    else:  # grouped, and any pipelined inference
        period = 1
        for st in range(s):
            out.append(Slot(st, FWD, st, 1))
            if training:
                out.append(Slot(st, BWD, 2 * s - 2 - st, 1))
    return sorted(out, key=_order), period


def total_cycles(cycle_slots: List[Slot], micro_batches: int) -> int:
    """Cycles from the first pass to the last of ``micro_batches`` micro-batches."""
    return max(sl.offset + sl.stride * (micro_batches - 1) for sl in cycle_slots) + 1 if micro_batches > 0 else 0


def active(cycle_slots: List[Slot], cycle: int, micro_batches: int) -> List[Tuple[Slot, int]]:
    """The passes of ``cycle`` in execution order, each with its micro-batch."""
    out = []
    for sl in cycle_slots:
        d = cycle - sl.offset
        if d >= 0 and d % sl.stride == 0 and d // sl.stride < micro_batches:
            out.append((sl, d // sl.stride))
    return out


def events(schedule: str, num_stages: int, micro_batches: int, training: bool = True) -> List[Event]:
    """Every pass of one weight update (training) or of ``micro_batches`` forward passes, in execution order."""
    assert micro_batches >= 1, micro_batches
    cycle_slots, _ = slots(schedule, num_stages, training)
    return [Event(sl.phase, sl.stage, mb) for c in range(total_cycles(cycle_slots, micro_batches))
            for sl, mb in active(cycle_slots, c, micro_batches)]


@functools.lru_cache(maxsize=4096)
def stash_depth(schedule: str, stage: int, num_stages: int) -> int:
    """Micro-batches stage ``stage`` holds between its forward and its backward (its stash FIFO depth), counted
    from the slots: the forwards that run before the backward of the same micro-batch, itself included."""
    cycle_slots, _ = slots(schedule, num_stages, training=True)
    fwd = next(sl for sl in cycle_slots if sl.stage == stage and sl.phase == FWD)
    bwd = next(sl for sl in cycle_slots if sl.stage == stage and sl.phase == BWD)
    # Micro-batch 0's backward runs in cycle bwd.offset; forwards of micro-batches m with a cycle before it (or the
    # same cycle: forwards run first) are live then.
    return (bwd.offset - fwd.offset) // fwd.stride + 1


def max_in_flight(order: List[Event], stage: int) -> int:
    """Most micro-batches whose forward has run on ``stage`` but whose backward has not, in an executed order."""
    live = peak = 0
    for ev in order:
        if ev.stage != stage:
            continue
        live += 1 if ev.phase == FWD else -1
        peak = max(peak, live)
    return peak


def recomputation_active(mode: str, num_stages: int) -> bool:
    """Whether activations are recomputed in the backward pass (see the module docstring)."""
    if mode == "all":
        return True
    return mode == "pipeline" and num_stages > 1


def stage_recomputes(mode: str, stage: int, num_stages: int) -> bool:
    """Whether ``stage`` runs its forward again before its backward. In a pipeline the last stage is exempt: its
    backward follows its forward in the same cycle, so nothing of it is stashed (PopART
    RecomputationType::Pipeline); ``all`` (RecomputeAll) recomputes every stage."""
    if not recomputation_active(mode, num_stages):
        return False
    return mode == "all" or stage < num_stages - 1
