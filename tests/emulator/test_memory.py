"""Memory model on small hand-built graphs: stash and variables (the graphs: ``memory_graphs``)."""
from __future__ import annotations

import pytest

from ipuexp.config.schema import Optimizer, RecomputationMode, Schedule, TensorLocation
from ipuexp.emulator.memory import plan_ipus
from ipuexp.emulator.stash import own_saved_bytes, segment_starts, stage_stash
from ipuexp.emulator.variables import elements_at_least, place, state_bytes
from ipuexp.graph.stages import assign_stages
from ipuexp.graph.types import Graph
from ipuexp.execution.execution import build_plan
from ipuexp.execution.schedule import events, max_in_flight, recomputation_active
from ipuexp.execution.schedule import stash_depth as fifo_depth

from memory_graphs import H, S, layer, graph, experiment, memory, category


@pytest.mark.parametrize("schedule", [Schedule.grouped, Schedule.interleaved, Schedule.sequential])
def test_stash_holds_what_the_functional_engine_keeps_in_flight(schedule):
    """Each IPU's stash is one entry per micro-batch the schedule's executed order keeps between a stage's forward
    and its backward (the functional engine runs that order: ``events``)."""
    g = graph()
    exp = experiment(recomputation__mode=RecomputationMode.none, pipeline__schedule=schedule)
    entry = g.blocks[0].saved_elements * 2  # fp16 bytes, every activation saved for backward
    order = events(schedule.value, 4, 64)
    assert [i.breakdown["stash"] for i in memory(exp, g).ipus] == [max_in_flight(order, s) * entry
                                                                   for s in range(4)]


def test_stash_entry_grows_with_the_micro_batch():
    for mode in ("none", "pipeline"):
        small = memory(experiment(recomputation__mode=RecomputationMode(mode)), graph(mbs=1))
        large = memory(experiment(recomputation__mode=RecomputationMode(mode)), graph(mbs=8))
        assert category(large, "stash") == 8 * category(small, "stash")


def test_grouped_stashes_more_than_interleaved_more_than_sequential():
    stash = {s: category(memory(experiment(pipeline__schedule=Schedule(s)), graph()), "stash")
             for s in ("grouped", "interleaved", "sequential")}
    assert stash["grouped"] > stash["interleaved"] > stash["sequential"] > 0


def test_recomputation_stashes_only_checkpoints():
    g = graph()
    without = memory(experiment(recomputation__mode=RecomputationMode.none), g)
    with_rc = memory(experiment(recomputation__mode=RecomputationMode.pipeline), g)
    entry_in = g.blocks[0].inputs[0].elements * 2 + g.blocks[0].inputs[1].elements * 4
    entry_saved = g.blocks[0].saved_elements * 2
    # IPU 0 holds stage 0 of 4: grouped depth 7 (PopART: 2 x 3 IPUs to the end + 1).
    assert with_rc.ipus[0].breakdown["stash"] == 7 * entry_in
    assert without.ipus[0].breakdown["stash"] == 7 * entry_saved
    assert without.ipus[0].total_bytes > with_rc.ipus[0].total_bytes


def test_pipeline_recomputation_needs_a_pipeline_but_all_does_not():
    assert not recomputation_active("pipeline", 1)
    assert recomputation_active("pipeline", 2)
    assert recomputation_active("all", 1)
    assert not recomputation_active("none", 4)


def test_checkpoint_every_layer_stashes_more_and_recomputes_less():
    g = graph(layers=4)
    base = experiment(layers_per_ipu=(4,), recomputation__mode=RecomputationMode.all)
    every = experiment(layers_per_ipu=(4,), recomputation__mode=RecomputationMode.all,
                       recomputation__checkpoint_every_layer=True)
    assert segment_starts(g.blocks, True) == [0, 1, 2, 3]
    a, b = memory(base, g).ipus[0], memory(every, g).ipus[0]
    assert b.breakdown["stash"] == 4 * a.breakdown["stash"]
    assert b.breakdown["activations"] < a.breakdown["activations"]


def shared_graph(mbs: int = 4, layers: int = 4) -> Graph:
    """The toy layers, each also keeping its output (as a final ReLU does), which the next layer keeps as its
    input: one [mbs*S, H] tensor saved by two consecutive blocks."""
    g = graph(mbs=mbs, layers=layers)
    for b in g.blocks:
        b.saved_input_elements = b.saved_output_elements = mbs * S * H
        b.saved_elements += mbs * S * H  # the output, now saved too
    return g


def test_tensor_saved_by_consecutive_blocks_is_stashed_once_per_stage():
    g = shared_graph()
    shared, saved = 4 * S * H * 2, g.blocks[0].saved_elements * 2  # fp16 bytes
    assert own_saved_bytes(g.blocks, 0, 2) == saved and own_saved_bytes(g.blocks, 1, 2) == saved - shared
    assert stage_stash(g.blocks[:2], 1, False, False, 2).entry_bytes == 2 * saved - shared
    assert stage_stash(g.blocks, 1, False, False, 2).entry_bytes == 4 * saved - 3 * shared
    # Through the model, without recomputation: two layers per stage share one tensor per stage ...
    two = experiment(layers_per_ipu=(2, 2), recomputation__mode=RecomputationMode.none)
    depth = [fifo_depth("grouped", i, 2) for i in range(2)]
    assert [i.breakdown["stash"] for i in memory(two, g).ipus] == [d * (2 * saved - shared) for d in depth]
    # ... but not across a stage boundary, even on the same IPU: each stage keeps its own FIFOs.
    split = experiment(layers_per_ipu=(1, 1, 1, 1), recomputation__mode=RecomputationMode.none,
                       pipeline__device_mapping=[0, 0, 1, 1])
    depth = [fifo_depth("grouped", i, 4) for i in range(4)]
    assert [i.breakdown["stash"] for i in memory(split, g).ipus] == [(depth[0] + depth[1]) * saved,
                                                                     (depth[2] + depth[3]) * saved]
    # Captures without the boundary fields (older caches) count every block's saved tensors in full.
    plain = graph()
    assert stage_stash(plain.blocks, 1, False, False, 2).entry_bytes == 4 * plain.blocks[0].saved_elements * 2


def test_recomputation_holds_a_shared_tensor_once_and_the_stage_input_once():
    g, plain = shared_graph(), graph()
    for b, p in zip(g.blocks, plain.blocks):  # the same saved tensors, without the boundary fields
        p.saved_elements = b.saved_elements
    exp = experiment(layers_per_ipu=(4,), recomputation__mode=RecomputationMode.all)
    with_fields, without = memory(exp, g).ipus[0], memory(exp, plain).ipus[0]
    entry = g.blocks[0].inputs[0].elements * 2 + g.blocks[0].inputs[1].elements * 4
    # One stage, no pipeline: the stage input (the only checkpoint) is held once. Layer 0 keeps its float part for
    # backward, which the boundary fields say, so beside the recomputed segment only the int part is left; a
    # capture without them counts the whole input.
    assert with_fields.breakdown["stash"] == g.blocks[0].inputs[1].elements * 4
    assert without.breakdown["stash"] == entry
    # At the peak (the last layer, all four recomputed) three tensors are held once, not twice.
    shared = 4 * S * H * 2
    label, _ = plan_ipus(build_plan(exp, assign_stages(g.blocks, [4])), g)[0].peak_step()
    assert label.endswith("layer3")
    assert without.breakdown["activations"] - with_fields.breakdown["activations"] == 3 * shared
    # Segments never share: with a checkpoint after every layer each segment is one block, as before.
    every = experiment(layers_per_ipu=(4,), recomputation__mode=RecomputationMode.all,
                       recomputation__checkpoint_every_layer=True)
    assert memory(every, g).ipus[0].breakdown["activations"] == memory(every, plain).ipus[0].breakdown[
        "activations"]


# Variables -------------------------------------------------------------------------------------------------

def test_optimizer_states_and_dtypes():
    assert state_bytes("adam", "float") == (4, 4)
    assert state_bytes("lamb", "half") == (2, 4)  # half first moment only
    assert state_bytes("sgd_momentum", "float") == (4, 0)
    assert state_bytes("sgd", "float") == (0, 0)
    g = graph()
    adam = category(memory(experiment(), g), "optimizer_state")
    exp = experiment()
    exp.optimizer.name = Optimizer.sgd_momentum
    assert category(memory(exp, g), "optimizer_state") == pytest.approx(adam / 2, rel=1e-6)
    exp.optimizer.name = Optimizer.sgd
    assert category(memory(exp, g), "optimizer_state") == 0


def test_rts_divides_optimizer_state_by_the_replication_factor():
    g = graph()
    plain = memory(experiment(replication_factor=4), g)
    sharded = experiment(replication_factor=4)
    sharded.options.tensor_locations.optimizer_state.replicated_tensor_sharding = True
    sharded.options.tensor_locations.optimizer_state.min_elements_for_replicated_tensor_sharding = 2
    rts = memory(sharded, g)
    for a, b in zip(plain.ipus, rts.ipus):
        assert b.breakdown["optimizer_state"] == pytest.approx(a.breakdown["optimizer_state"] / 4, rel=1e-3)
    # The default threshold (8192 elements) keeps small tensors whole: less than 4x saved, more than 3x.
    sharded.options.tensor_locations.optimizer_state.min_elements_for_replicated_tensor_sharding = 8192
    partly = memory(sharded, g)
    assert 3 * category(partly, "optimizer_state") < category(plain, "optimizer_state") < 4 * category(
        partly, "optimizer_state")
    # Without replicas there is nothing to shard across.
    single = experiment()
    single.options.tensor_locations.optimizer_state.replicated_tensor_sharding = True
    assert category(memory(single, g), "optimizer_state") == category(memory(experiment(), g), "optimizer_state")


def test_off_chip_optimizer_state_leaves_the_ipu():
    g = graph()
    on = memory(experiment(), g)
    exp = experiment()
    exp.options.tensor_locations.optimizer_state.on_chip = False
    off = memory(exp, g)
    for a, b in zip(on.ipus, off.ipus):
        assert a.breakdown["optimizer_state"] > 1_000_000
        # Only tensors below min_elements_for_off_chip (2 elements) may stay: at most 3 of them here.
        assert b.breakdown["optimizer_state"] <= 3 * 8
        assert b.always_live_bytes < a.always_live_bytes


def test_off_chip_weights_are_streamed_for_use():
    g = graph()
    exp = experiment()
    exp.options.tensor_locations.weights.on_chip = False
    off = memory(exp, g)
    on = memory(experiment(), g)
    assert category(off, "weights") < category(on, "weights") / 1000
    assert all(i.breakdown["streamed"] > 0 for i in off.ipus)


def test_threshold_bound_on_tensors_moved():
    assert elements_at_least(1000, 4, 700, 800) == 0
    assert elements_at_least(1000, 4, 700, 2) == 1000 - 3
    loc = TensorLocation(on_chip=False, min_elements_for_off_chip=2)
    p = place(1000, 1, 1000, 4, loc, 1)
    assert (p.on_chip_bytes, p.off_chip_bytes) == (0, 4000)


def test_precision_sets_weight_bytes_and_accumulators_need_accumulation():
    g = graph()
    half = memory(experiment(precision="16.16"), g)
    full = memory(experiment(precision="32.32"), g)
    assert category(full, "weights") == 2 * category(half, "weights")
    one_ipu = experiment(layers_per_ipu=(4,), gradient_accumulation=1)
    m = memory(one_ipu, g)
    assert m.ipus[0].breakdown["gradient_accumulators"] == 0
    # Weight gradients wait for the update instead: all of them are live at the update step.
    plan = plan_ipus(build_plan(one_ipu, assign_stages(g.blocks, [4])), g)[0]
    label, live = plan.steps[-1]
    assert label == "weight update" and live["gradients"] == sum(b.parameters for b in g.blocks) * 2
    assert memory(experiment(layers_per_ipu=(4,)), g).ipus[0].breakdown["gradient_accumulators"] > 0


def test_inference_holds_no_training_state():
    exp = experiment()
    exp.training = False
    m = memory(exp, graph())
    for name in ("stash", "gradient_accumulators", "optimizer_state", "gradients"):
        assert category(m, name) == 0
    assert category(m, "weights") > 0


# Temporaries -----------------------------------------------------------------------------------------------
