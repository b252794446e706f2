"""Memory model on small hand-built graphs: stash, variables, temporaries, code, tiles, report, liveness."""
from __future__ import annotations

import copy
import functools
import re

import pytest

from ipuexp.config.compose import load_experiment
from ipuexp.config.schema import ExperimentConfig, Optimizer, PartialsType, RecomputationMode, Schedule, TensorLocation
from ipuexp.emulator import code_size
from ipuexp.emulator.cost import plan_matmul
from ipuexp.emulator.memory import estimate_memory, liveness_series, plan_ipus
from ipuexp.emulator.stash import own_saved_bytes, segment_starts, stage_stash
from ipuexp.emulator.temporary import matmul_temporary, vocabulary_split
from ipuexp.emulator.tiles import tile_load
from ipuexp.emulator.variables import elements_at_least, place, state_bytes
from ipuexp.graph.stages import assign_stages
from ipuexp.graph.types import BlockCapture, Graph, OpRecord, Stage, TensorInfo
from ipuexp.execution.execution import amp_for_ipu, build_plan, tile_context
from ipuexp.execution.schedule import events, max_in_flight, recomputation_active
from ipuexp.execution.schedule import stash_depth as fifo_depth

H = 256  # hidden size of the toy transformer-like layer
S = 64   # tokens per sample


def _t(shape, dtype="float32"):
    n = 1
    for d in shape:
        n *= d
    return TensorInfo(shape=list(shape), dtype=dtype, elements=n)


def layer(name: str, mbs: int, hidden: int = H, is_layer: bool = True) -> BlockCapture:
    """A feed-forward layer: [mbs*S, hidden] x [hidden, 4*hidden] and back, GELU between."""
    m = mbs * S
    f = 4 * hidden
    ops = [
        OpRecord("aten.addmm", "matmul", "fwd", 1, 2 * m * hidden * f, m * hidden + hidden * f + f, m * f,
                 [m, hidden, f]),
        OpRecord("aten.gelu", "elementwise", "fwd", 1, m * f, m * f, m * f),
        OpRecord("aten.addmm", "matmul", "fwd", 1, 2 * m * f * hidden, m * f + f * hidden + hidden, m * hidden,
                 [m, f, hidden]),
        OpRecord("aten.view", "data", "fwd", 2, 0, 0, 0),
        OpRecord("aten.mm", "matmul", "bwd", 1, 2 * m * hidden * f, m * hidden + hidden * f, m * f, [m, hidden, f]),
        OpRecord("aten.mm", "matmul", "bwd", 1, 2 * m * hidden * f, m * f + m * hidden, hidden * f, [f, m, hidden]),
        OpRecord("aten.gelu_backward", "elementwise", "bwd", 1, m * f, 2 * m * f, m * f),
        OpRecord("aten.mm", "matmul", "bwd", 1, 2 * m * hidden * f, m * hidden + f * hidden, m * f, [m, hidden, f]),
        OpRecord("aten.mm", "matmul", "bwd", 1, 2 * m * hidden * f, m * hidden + m * f, hidden * f, [hidden, m, f]),
    ]
    return BlockCapture(
        name=name, is_layer=is_layer, parameters=2 * hidden * f + hidden + f, parameter_tensors=4,
        largest_parameter=hidden * f, fwd_flops=4 * m * hidden * f, bwd_flops=8 * m * hidden * f,
        saved_elements=m * hidden + 2 * m * f, saved_int_bytes=0, peak_fwd_elements=m * hidden + 3 * m * f,
        inputs=[_t([mbs, S, hidden]), _t([mbs, S], "int32")], outputs=[_t([mbs, S, hidden]), _t([mbs, S], "int32")],
        ops=ops, op_count_fwd=5, op_count_bwd=4)


def graph(mbs: int = 4, layers: int = 4, hidden: int = H) -> Graph:
    blocks = [layer(f"layer{i}", mbs, hidden) for i in range(layers)]
    return Graph(model="toy", micro_batch_size=mbs, blocks=blocks, input_bytes_per_sample=S * hidden * 4,
                 input_elements_per_sample=S * hidden, num_layers=layers)


@functools.lru_cache(maxsize=None)
def _default() -> ExperimentConfig:
    """The composed default configuration (Mk2 with its fitted calibration, which the matmul planner uses)."""
    return load_experiment()


def experiment(layers_per_ipu=(1, 1, 1, 1), **options) -> ExperimentConfig:
    exp = copy.deepcopy(_default())
    exp.options.pipeline.layers_per_ipu = list(layers_per_ipu)
    exp.options.gradient_accumulation = 64
    exp.optimizer.name = Optimizer.adam
    for key, value in options.items():
        target = exp.options
        *path, last = key.split("__")
        for p in path:
            target = getattr(target, p)
        setattr(target, last, value)
    return exp


def memory(exp: ExperimentConfig, g: Graph):
    exp.data.micro_batch_size = g.micro_batch_size
    stages = assign_stages(g.blocks, exp.options.pipeline.layers_per_ipu, exp.options.pipeline.device_mapping)
    return estimate_memory(build_plan(exp, stages), g)


def category(mem, name: str) -> int:
    return sum(i.breakdown[name] for i in mem.ipus)


# Stash FIFOs -----------------------------------------------------------------------------------------------

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

def _ctx(amp: float = 0.6, partials: PartialsType = PartialsType.half):
    exp = experiment(available_memory_proportion=amp, partials_type=partials, precision="16.16")
    return tile_context(build_plan(exp, [Stage(0, 0, [])]), 0)


def _mm(shape, phase="fwd") -> OpRecord:
    m, k, n = shape
    return OpRecord("aten.mm", "matmul", phase, 1, 2 * m * k * n, m * k + k * n, m * n, [m, k, n])


def test_temporary_is_the_plan_the_planner_chooses_not_the_bound():
    # A K-heavy product (BERT-Large's FFN output at 768 tokens): the fastest plan splits K and needs well
    # under the 0.4 bound; the memory model counts the very plan whose cycles the timing model counts.
    ctx = _ctx(0.4)
    rec = _mm([768, 4096, 1024])
    t = matmul_temporary(rec, ctx)
    plan = plan_matmul(768, 4096, 1024, 768 * 4096, 4096 * 1024, 1, ctx)
    assert t.bytes == int(plan.temp_bytes_per_tile * ctx.compute_tiles)
    assert plan.split_k > 1 and t.fits and t.serial_pieces == 1
    assert t.bytes < 0.8 * 0.4 * ctx.tile_memory_bytes * ctx.compute_tiles


def test_proportion_bounds_and_half_partials_shrink_temporaries():
    rec = _mm([4096, 1024, 4096])
    roomy, tight = matmul_temporary(rec, _ctx(0.6)), matmul_temporary(rec, _ctx(0.05))
    assert tight.bytes < roomy.bytes
    for amp in (0.05, 0.1, 0.3, 0.6):
        t = matmul_temporary(rec, _ctx(amp))
        assert t.fits and t.bytes <= amp * 638976 * 1472
    floats = matmul_temporary(rec, _ctx(1.0, PartialsType.float))
    halves = matmul_temporary(rec, _ctx(1.0, PartialsType.half))
    assert halves.bytes < floats.bytes
    # Below what any one-step plan needs, the planner serialises the product.
    assert matmul_temporary(_mm([65536, 1024, 4096]), _ctx(0.01)).serial_pieces > 1
    # Through the whole model: the proportion bounds the temporaries of every IPU.
    g = graph(mbs=16, hidden=1024)
    low = memory(experiment(available_memory_proportion=0.05), g)
    high = memory(experiment(available_memory_proportion=0.6), g)
    assert category(low, "temporary") < category(high, "temporary")
    for i in low.ipus:
        assert i.breakdown["temporary"] <= 0.05 * i.capacity_bytes
    fl = memory(experiment(available_memory_proportion=1.0, partials_type=PartialsType.float), graph())
    hf = memory(experiment(available_memory_proportion=1.0, partials_type=PartialsType.half), graph())
    assert category(hf, "temporary") < category(fl, "temporary")


def test_embedding_serialisation_splits_the_vocabulary_side():
    vocab, hidden, tokens = 30400, 1024, 160
    table = vocab * hidden
    # Decoder [tokens, hidden] x [hidden, vocab]: the vocabulary is N, the right operand shrinks.
    assert vocabulary_split([tokens, hidden, vocab], 1.0, table, table, 5) == ([tokens, hidden, vocab // 5], 1.0,
                                                                             table / 5)
    # Its input gradient [tokens, vocab] x [vocab, hidden]: K, both operands shrink.
    assert vocabulary_split([tokens, vocab, hidden], 8.0, table, table, 5) == ([tokens, vocab // 5, hidden], 1.6,
                                                                             table / 5)
    # Not the table, or no serialisation: unchanged.
    assert vocabulary_split([tokens, hidden, hidden], 1.0, 2.0, table, 5) == ([tokens, hidden, hidden], 1.0, 2.0)
    assert vocabulary_split([tokens, hidden, vocab], 1.0, 2.0, table, 1) == ([tokens, hidden, vocab], 1.0, 2.0)
    rec = _mm([tokens, hidden, vocab])
    ctx = _ctx(0.1)
    assert matmul_temporary(rec, ctx, table, 5).bytes < matmul_temporary(rec, ctx).bytes


def test_proportion_per_ipu():
    assert amp_for_ipu(0.3, 2, 4) == 0.3
    assert amp_for_ipu([0.1, 0.2], 1, 2) == 0.2
    assert amp_for_ipu([0.4], 3, 4) == 0.4
    with pytest.raises(AssertionError):  # validated with the config: one value, or one per IPU
        amp_for_ipu([0.1, 0.2, 0.3], 0, 4)
    m = memory(experiment(available_memory_proportion=[0.05, 0.6, 0.6, 0.6]), graph(mbs=16, hidden=1024))
    assert m.ipus[0].breakdown["temporary"] < m.ipus[1].breakdown["temporary"]


# Code ------------------------------------------------------------------------------------------------------

def test_outlining_shares_the_code_of_identical_layers():
    two = memory(experiment(layers_per_ipu=(2,)), graph(layers=2)).ipus[0].breakdown["control_code"]
    four = memory(experiment(layers_per_ipu=(4,)), graph(layers=4)).ipus[0].breakdown["control_code"]
    assert four == two
    g = graph(layers=2)
    g.blocks[1] = layer("wide", 4, hidden=2 * H)
    mixed = memory(experiment(layers_per_ipu=(2,)), g).ipus[0].breakdown["control_code"]
    assert mixed > two


def test_exchange_code_follows_the_ring_not_the_replica_count():
    from ipuexp.emulator.code_size import CodeUnits, code_bytes

    # PopLibs ring: a switch case per ring position while the fragment per tile is large
    # (code linear in the ring length, as the optimisation guide measured from 1 to 4 replicas) ...
    big = CodeUnits(ops=10, host_tensors=10, boundary_tensors=0, parameter_tensors=100,
                    parameter_elements=100_000_000, tiles=1472)
    code = [code_bytes(big, r, True)["global_exchange_code"] for r in (1, 2, 4, 8)]
    steps = [b - a for a, b in zip(code, code[1:])]
    assert steps[1] == pytest.approx(2 * steps[0], rel=1e-3) and steps[2] == pytest.approx(4 * steps[0], rel=1e-3)
    # ... and a dynamic slice, whose code does not grow with the ring, once the fragment per tile is small.
    small = CodeUnits(10, 10, 0, 161, parameter_elements=25_557_032, tiles=1472)
    at = {r: code_bytes(small, r, True)["global_exchange_code"] for r in (16, 128, 256, 512)}
    assert at[16] < at[128] and at[256] == at[512] < at[16]
    g = graph()
    # Inference has no cross-replica reduction.
    # Control and internal exchange code grow once with replication, not per replica.
    control = [category(memory(experiment(replication_factor=r), g), "control_code") for r in (1, 4, 16)]
    assert control[0] < control[1] == control[2]
    many, one = experiment(replication_factor=8), experiment(replication_factor=1)
    many.training = one.training = False
    assert category(memory(many, g), "control_code") == category(memory(one, g), "control_code")
    assert category(memory(many, g), "global_exchange_code") == category(memory(one, g), "global_exchange_code")


def test_table_4_1_constants_reproduce_the_table():
    units = code_size.CodeUnits(ops=code_size.REF_OPS, host_tensors=code_size.REF_HOST_TENSORS,
                                boundary_tensors=code_size.REF_BOUNDARY_TENSORS,
                                parameter_tensors=code_size.REF_PARAMETER_TENSORS)
    for i, replicas in enumerate(code_size.TABLE_4_1_REPLICAS):
        code = code_size.code_bytes(units, replicas, training=True)
        assert code["control_code"] == pytest.approx(code_size.TABLE_4_1_CONTROL[i], rel=1e-6)
        assert code["internal_exchange_code"] == pytest.approx(code_size.TABLE_4_1_INTERNAL_EXCHANGE[i], rel=1e-6)
        assert code["global_exchange_code"] == pytest.approx(code_size.TABLE_4_1_GLOBAL_EXCHANGE[i], rel=1e-6)
        assert code["host_exchange_code"] == pytest.approx(code_size.TABLE_4_1_HOST_EXCHANGE[i], rel=2e-3)
    one = code_size.code_bytes(units, 1, True)["global_exchange_code"]
    four = code_size.code_bytes(units, 4, True)["global_exchange_code"]
    assert four / one == pytest.approx(4.5, abs=0.05)  # seed 001 Table 4.1


# Tiles, IO tiles and the report ----------------------------------------------------------------------------

def test_tile_load_spreads_and_io_tiles():
    load = tile_load(1472 * 1000, 500, 0, 1472, 0, 638976, 0.9)
    assert load.max_tile == 0 and load.max_tile_bytes == 1500
    io = tile_load(1440 * 1000, 0, 32 * 600_000, 1472, 32, 638976, 0.9)
    assert io.compute_tiles == 1440 and io.max_tile == 1440
    assert io.io_buffer_bytes == 600_000 > io.io_buffer_limit


def test_io_tiles_must_hold_a_micro_batch():
    g = graph(mbs=256, hidden=1024)
    exp = experiment(io__num_io_tiles=32)
    m = memory(exp, g)
    # 256 x 64 x 1024 token vectors of fp16 input = 32 MiB does not fit on 32 IO tiles of 624 KiB.
    assert not m.fits
    assert any("IO-tile stream buffers" in line for line in m.report)
    assert any("num_io_tiles" in line for line in m.report)
    roomy = memory(experiment(io__num_io_tiles=64), graph(mbs=16, hidden=1024))
    assert roomy.ipus[0].breakdown["host_io_buffers"] > 0


def test_io_tiles_take_tiles_from_compute():
    g = graph(mbs=4)
    a = memory(experiment(), g).ipus[1]
    b = memory(experiment(io__num_io_tiles=192), g).ipus[1]
    assert b.max_tile_bytes > a.max_tile_bytes


def test_out_of_memory_is_a_result_with_poplar_words():
    g = graph(mbs=256, hidden=1024, layers=4)
    m = memory(experiment(layers_per_ipu=(4,), recomputation__mode=RecomputationMode.none), g)
    assert not m.fits and not m.ipus[0].fits
    first = m.report[0]
    assert re.fullmatch(r"Out of memory on tile \d+: \d+ bytes used but tiles only have 638976 bytes of memory",
                        first)
    assert "stash" in m.report[1].split("largest:")[1].split(",")[0]
    remedies = [line for line in m.report if re.match(r"\s+\d+\. ", line)]
    for key in ("micro_batch_size", "recomputation", "available_memory_proportion"):
        assert any(key in r for r in remedies)
    assert "layers_per_ipu" in remedies[-1]  # more IPUs close the list
    assert m.ipus[0].max_tile_bytes > 638976


def test_remedies_are_ordered_by_what_they_free_and_never_free_nothing():
    from ipuexp.emulator.oom import FailingIPU, _remedies

    exp = experiment(layers_per_ipu=(4,), recomputation__mode=RecomputationMode.none)
    plan = build_plan(exp, assign_stages(graph().blocks, [4]))
    mib = 1 << 20
    failing = [FailingIPU(ipu=0, tile=0, tile_bytes=700_000, tile_memory=638976,
                          breakdown={"optimizer_state": 300 * mib, "temporary": 100 * mib, "stash": 0},
                          amp=0.6, layers=4, io_overflow=False, io_buffer_bytes=0, io_buffer_limit=0)]
    out = _remedies(failing, plan)
    saved = [b for b, _ in out[:-1]]
    assert saved == sorted(saved, reverse=True) and all(b > 0 for b in saved)
    assert "optimizer_state.on_chip=false" in out[0][1]
    assert not any("recomputation.mode" in text for _, text in out)  # an empty stash: recomputation frees nothing
    assert "layers_per_ipu" in out[-1][1]


def test_a_model_too_large_for_its_ipus_says_how_many_it_needs():
    g = graph(mbs=1, hidden=4096, layers=8)
    m = memory(experiment(layers_per_ipu=(8,)), g)
    assert not m.fits
    last = m.report[-1]
    assert last.startswith("No remedy above fits IPU 0") and re.search(r"needs at least \d+ IPUs", last)


def test_fitting_configuration_reports_nothing():
    m = memory(experiment(), graph())
    assert m.fits and m.report == [] and all(i.fits for i in m.ipus)
    for i in m.ipus:
        assert i.total_bytes == i.always_live_bytes + i.not_always_live_bytes == sum(i.breakdown.values())
        assert i.capacity_bytes == 1472 * 638976
        assert i.max_tile_bytes >= i.total_bytes / 1472


def test_tile_numbers_are_poplars():
    g = graph(mbs=64, hidden=2048, layers=4)
    m = memory(experiment(recomputation__mode=RecomputationMode.none), g)
    assert [i.max_tile for i in m.ipus] == [0, 1472, 2 * 1472, 3 * 1472]


# Liveness --------------------------------------------------------------------------------------------------

def test_liveness_series_walks_forward_recompute_backward_update():
    exp = experiment(layers_per_ipu=(2, 2))
    g = graph()
    stages = assign_stages(g.blocks, [2, 2])
    series = liveness_series(build_plan(exp, stages), g, ipu=0)
    labels = [s.label for s in series]
    assert labels == ["fwd layer0", "fwd layer1", "recompute layer0", "recompute layer1", "bwd layer1", "bwd layer0",
                      "weight update"]
    assert len({s.always_live for s in series}) == 1
    mem = estimate_memory(build_plan(exp, stages), g).ipus[0]
    assert max(s.not_always_live for s in series) == mem.not_always_live_bytes
    assert series[0].always_live == mem.always_live_bytes
    with pytest.raises(ValueError, match="ipu"):
        liveness_series(build_plan(exp, stages), g, ipu=7)


def test_tied_table_on_another_ipu_is_copied():
    g = graph(layers=2)
    g.blocks[0].largest_parameter = g.blocks[0].parameters = 1_000_000
    g.blocks[1].tied_parameters = 1_000_000
    exp = experiment(layers_per_ipu=(1, 1))
    plans = plan_ipus(build_plan(exp, assign_stages(g.blocks, [1, 1])), g)
    same = experiment(layers_per_ipu=(1, 1), pipeline__device_mapping=[0, 0])
    assert plans[1].always_live["weights"] > 1_000_000 * 2
    shared = plan_ipus(build_plan(same, assign_stages(g.blocks, [1, 1], [0, 0])), g)
    assert len(shared) == 1
    assert shared[0].always_live["weights"] == (g.blocks[0].parameters + g.blocks[1].parameters) * 2
