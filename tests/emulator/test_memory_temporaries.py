"""Memory model on small hand-built graphs: temporaries, code, tiles, the out-of-memory report and its
remedies, liveness (the graphs: ``memory_graphs``)."""
from __future__ import annotations

import re

import pytest

from ipuexp.config.schema import PartialsType, RecomputationMode
from ipuexp.emulator import code_size
from ipuexp.emulator.matmul_plan import plan_matmul
from ipuexp.emulator.memory import estimate_memory, liveness_series, plan_ipus
from ipuexp.emulator.temporary import matmul_temporary, vocabulary_split
from ipuexp.emulator.tiles import tile_load
from ipuexp.graph.stages import assign_stages
from ipuexp.graph.types import OpRecord, Stage
from ipuexp.execution.execution import amp_for_ipu, build_plan, tile_context

from memory_graphs import H, layer, graph, experiment, memory, category


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
