"""Event orders of the pipeline schedules: complete, causal, in order per stage, with the documented stash depths."""
from __future__ import annotations

import itertools

import pytest

from ipuexp.execution.schedule import BWD, FWD, SCHEDULES, events, max_in_flight, slots, stash_depth

SHAPES = [(1, 1), (1, 5), (2, 1), (4, 10), (4, 3), (5, 16), (3, 7)]


def position(order):
    return {(e.phase, e.stage, e.micro_batch): i for i, e in enumerate(order)}


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("stages,micro_batches", SHAPES)
def test_training_orders_are_complete_and_causal(schedule, stages, micro_batches):
    order = events(schedule, stages, micro_batches, training=True)
    pos = position(order)
    expected = {(p, s, m) for p in (FWD, BWD) for s in range(stages) for m in range(micro_batches)}
    assert len(order) == len(expected) and set(pos) == expected
    for s, m in itertools.product(range(stages), range(micro_batches)):
        if s > 0:
            assert pos[(FWD, s - 1, m)] < pos[(FWD, s, m)]  # activations flow forward
        if s < stages - 1:
            assert pos[(BWD, s + 1, m)] < pos[(BWD, s, m)]  # gradients flow back
        assert pos[(FWD, s, m)] < pos[(BWD, s, m)]
    for s in range(stages):  # each stage accumulates its gradients in micro-batch order
        backward = [e.micro_batch for e in order if e.stage == s and e.phase == BWD]
        assert backward == list(range(micro_batches))


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("stages,micro_batches", SHAPES)
def test_inference_orders_are_forward_only(schedule, stages, micro_batches):
    order = events(schedule, stages, micro_batches, training=False)
    assert all(e.phase == FWD for e in order)
    pos = position(order)
    assert len(pos) == stages * micro_batches
    for s, m in itertools.product(range(1, stages), range(micro_batches)):
        assert pos[(FWD, s - 1, m)] < pos[(FWD, s, m)]


@pytest.mark.parametrize("stages", [2, 3, 4, 6])
def test_stash_depths_match_the_memory_guide(stages):
    """IPU optimisation guide section 4.2 with N = S - 1 (PopART's "2*(IPUs to end) + 1"): grouped stashes 2N+1
    on the first IPU, 2(N-1)+1 on the second, ...; interleaved N+1 on the first; sequential holds one."""
    m = 4 * stages
    n = stages - 1
    grouped = events("grouped", stages, m)
    interleaved = events("interleaved", stages, m)
    sequential = events("sequential", stages, m)
    assert [max_in_flight(grouped, s) for s in range(stages)] == [2 * (n - s) + 1 for s in range(stages)]
    assert max_in_flight(interleaved, 0) == n + 1
    assert [max_in_flight(interleaved, s) for s in range(stages)] == [stages - s for s in range(stages)]
    assert [max_in_flight(sequential, s) for s in range(stages)] == [1] * stages
    for schedule, order in (("grouped", grouped), ("interleaved", interleaved), ("sequential", sequential)):
        assert [stash_depth(schedule, s, stages) for s in range(stages)] == \
            [max_in_flight(order, s) for s in range(stages)]


def test_grouped_pipeline_length():
    """PopART's pipeline has 2S - 1 pipeline stages: the first micro-batch's last backward (stage 0) runs in
    cycle 2S - 2, the last micro-batch's in cycle M + 2S - 3, and the grouped order runs cycle by cycle."""
    s, m = 4, 10
    order = events("grouped", s, m)
    first_bwd0 = next(i for i, e in enumerate(order) if e.phase == BWD and e.stage == 0)
    # before the first stage-0 backward every forward of micro-batches 0..2S-2 on stage 0 has run
    fwd0_before = sum(1 for e in order[:first_bwd0] if e.phase == FWD and e.stage == 0)
    assert fwd0_before == 2 * s - 1


def test_sequential_runs_one_micro_batch_at_a_time():
    order = events("sequential", 3, 2)
    assert [(e.phase, e.stage, e.micro_batch) for e in order] == [
        (FWD, 0, 0), (FWD, 1, 0), (FWD, 2, 0), (BWD, 2, 0), (BWD, 1, 0), (BWD, 0, 0),
        (FWD, 0, 1), (FWD, 1, 1), (FWD, 2, 1), (BWD, 2, 1), (BWD, 1, 1), (BWD, 0, 1)]


@pytest.mark.parametrize("args", [("pipedream", 2, 2), ("grouped", 0, 2), ("grouped", 2, 0)])
def test_invariants_the_config_guarantees_are_asserted(args):
    # The schedule name and the counts are validated with the config (one rule table); here they are invariants.
    with pytest.raises(AssertionError):
        events(*args)


def test_four_stage_depths_are_poparts():
    assert [stash_depth("grouped", s, 4) for s in range(4)] == [7, 5, 3, 1]
    assert [stash_depth("interleaved", s, 4) for s in range(4)] == [4, 3, 2, 1]
    assert [stash_depth("sequential", s, 4) for s in range(4)] == [1, 1, 1, 1]
    assert stash_depth("grouped", 0, 1) == 1  # no pipeline


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_periods(schedule):
    _, period = slots(schedule, 4, training=True)
    assert period == {"grouped": 1, "interleaved": 2, "sequential": 8}[schedule]
