"""Throughput model end to end on a small hand-built transformer-like graph with the real IPU configs."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from ipuexp.config.schema import (ExperimentConfig, HostFramework, IPUHardware, PartialsType, RecomputationMode, Schedule,
                                  SystemConfig)
from ipuexp.config.store import CONF_DIR
from ipuexp.emulator.timing import analyse, estimate_throughput, step_events
from ipuexp.graph.stages import assign_stages
from ipuexp.graph.types import BlockCapture, Graph, OpRecord, TensorInfo
from ipuexp.execution.execution import build_plan

S = 128  # tokens per sample


def _load(schema, path):
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.load(path)))


def mm(m, k, n, phase="fwd"):
    return OpRecord("aten.mm", "matmul", phase, 1, 2 * m * k * n, m * k + k * n, m * n, [m, k, n])


def ew(op, elements, phase="fwd", kind="elementwise"):
    return OpRecord(op, kind, phase, 1, 0, elements, elements)


def layer(name: str, mbs: int, h: int, is_layer: bool = True) -> BlockCapture:
    m, f = mbs * S, 4 * h
    ops = [mm(m, h, 3 * h), mm(m, h, h), ew("aten.native_layer_norm", m * h, kind="norm"), mm(m, h, f),
           ew("aten.gelu", m * f), mm(m, f, h),
           mm(m, f, h, "bwd"), mm(f, m, h, "bwd"), ew("aten.gelu_backward", 2 * m * f, "bwd"), mm(m, h, f, "bwd"),
           mm(h, m, f, "bwd"), mm(m, h, h, "bwd"), mm(h, m, h, "bwd"), mm(m, 3 * h, h, "bwd"),
           mm(h, m, 3 * h, "bwd"), ew("aten.native_layer_norm_backward", 2 * m * h, "bwd", "norm")]
    t = TensorInfo([mbs, S, h], "float32", m * h)
    params = 12 * h * h
    return BlockCapture(name, is_layer, params, 6, h * f, sum(o.flops for o in ops if o.phase == "fwd"),
                        sum(o.flops for o in ops if o.phase == "bwd"), 6 * m * h, 0, 8 * m * h, [t], [t], ops, 6, 10)


def graph(mbs: int = 4, layers: int = 8, h: int = 1024) -> Graph:
    blocks = [layer(f"layer{i}", mbs, h) for i in range(layers)]
    return Graph("toy", mbs, blocks, input_bytes_per_sample=S * h * 4, input_elements_per_sample=S * h,
                 num_layers=layers)


def experiment(layers_per_ipu=(2, 2, 2, 2), gen="bow", **options) -> ExperimentConfig:
    exp = ExperimentConfig()
    exp.ipu = _load(IPUHardware, CONF_DIR / "ipu" / f"{gen}.yaml")
    exp.system = _load(SystemConfig, CONF_DIR / "system" / "pod16.yaml")
    exp.options.pipeline.layers_per_ipu = list(layers_per_ipu)
    exp.options.gradient_accumulation = 64
    exp.options.partials_type = PartialsType.half
    exp.options.available_memory_proportion = 0.3
    # The device's mechanisms alone: a loop on the device pays no PopTorch loop's work per host call.
    exp.host.framework = HostFramework.tensorflow
    for key, value in options.items():
        target, *path = key.split("__")
        obj = exp.data if target == "data" else exp.options
        if target not in ("data",):
            path = [target, *path]
        for p in path[:-1]:
            obj = getattr(obj, p)
        setattr(obj, path[-1], value)
    return exp


def test_device_iterations_share_a_poptorch_loops_host_call():
    # A short step (GA 4) under a PopTorch loop: the loop's work per host call is shared by the device iterations.
    def sps(framework, di):
        exp = experiment(gradient_accumulation=4, device_iterations=di)
        exp.host.framework = framework
        return throughput(exp).samples_per_s

    poptorch = [sps(HostFramework.poptorch, di) for di in (1, 4, 16)]
    assert poptorch == sorted(poptorch) and poptorch[-1] > 1.5 * poptorch[0]
    device_loop = [sps(HostFramework.tensorflow, di) for di in (1, 16)]
    assert device_loop[1] / device_loop[0] < 1.01  # the runtime's round trip alone is microseconds
    assert device_loop[0] > poptorch[0]


def throughput(exp: ExperimentConfig, g: Graph = None):
    g = g or graph(exp.data.micro_batch_size if exp.data.micro_batch_size > 1 else 4)
    exp.data.micro_batch_size = g.micro_batch_size
    p = exp.options.pipeline
    return estimate_throughput(build_plan(exp, assign_stages(g.blocks, p.layers_per_ipu, p.device_mapping)), g)


def test_figures_are_consistent():
    f = throughput(experiment())
    assert f.samples_per_s == pytest.approx(4 * 64 / f.step_time_s)
    assert sum(f.breakdown.values()) == pytest.approx(f.step_time_s, rel=1e-9)
    assert set(f.breakdown) == {"compute", "recompute", "exchange", "host_io", "weight_update", "all_reduce", "idle"}
    assert len(f.utilisation) == 4 and all(0 < u <= 1 for u in f.utilisation)
    assert 0 < f.bubble_fraction < 1
    assert f.samples_per_s < f.peak_flops_bound_samples_per_s


def test_throughput_rises_with_gradient_accumulation_and_flattens():
    # Seed 001 4.2: pipelining works best when GA >> stages; the ramp share ~2N/(GA+2N) falls with GA.
    sps = {ga: throughput(experiment(gradient_accumulation=ga)).samples_per_s for ga in (8, 16, 64, 256, 1024, 4096)}
    values = list(sps.values())
    assert values == sorted(values)
    gains = [b / a for a, b in zip(values, values[1:])]
    assert gains == sorted(gains, reverse=True)  # diminishing returns
    assert sps[4096] / sps[1024] < 1.01
    n = 4
    for ga in (8, 16, 64):
        ramp = 1 - sps[ga] / sps[4096]
        assert 0.25 * 2 * n / (ga + 2 * n) < ramp <= 2 * n / (ga + 2 * n)


def test_device_iterations_never_hurt_and_help_small_steps():
    big = [throughput(experiment(device_iterations=d)).samples_per_s for d in (1, 4, 16)]
    assert big == sorted(big)
    small_graph = graph(mbs=1, layers=1, h=128)
    small = [throughput(experiment((1,), gradient_accumulation=1, device_iterations=d), small_graph).samples_per_s
             for d in (1, 4, 16)]
    assert small == sorted(small) and small[-1] > 1.2 * small[0]


def test_grouped_faster_than_interleaved_faster_than_sequential():
    sps = {s: throughput(experiment(pipeline__schedule=Schedule(s))).samples_per_s
           for s in ("grouped", "interleaved", "sequential")}
    assert sps["grouped"] > sps["interleaved"] > sps["sequential"]


def test_io_tiles_help_an_io_bound_single_ipu_model_and_cost_compute_otherwise():
    # Seed 001 4.4.2: IO tiles overlap transfers with compute for single-IPU or grouped pipelines.
    small = graph(mbs=16, layers=1, h=256)
    io_bound = {t: throughput(experiment((1,), replication_factor=16, num_instances=16, io__num_io_tiles=t),
                              small).samples_per_s for t in (0, 64)}
    assert io_bound[64] > 1.1 * io_bound[0]
    compute_bound = {t: throughput(experiment((1,), synthetic_data=True, io__num_io_tiles=t), small).samples_per_s
                     for t in (0, 64)}
    assert 0.85 * compute_bound[0] < compute_bound[64] < compute_bound[0]


def test_more_host_instances_relieve_a_host_bound_run():
    # Seed 001 4.3.2: with many replicas one host process limits throughput; PopRun instances share the work.
    small = graph(mbs=1, layers=1, h=256)
    sps = [throughput(experiment((1,), replication_factor=16, num_instances=i), small).samples_per_s
           for i in (1, 4, 16)]
    assert sps == sorted(sps) and sps[-1] > 2 * sps[0]


def test_one_poptorch_process_feeds_its_replicas_one_after_the_other():
    # PopART's stream callbacks hand each replica its micro-batch on Poplar's one default callback thread: a short
    # pipeline cycle waits for the host (replica_feed_s per replica); TensorFlow's infeeds do not pay it.
    small = graph(mbs=1, layers=4, h=256)

    def step(framework, replicas, instances=1):
        exp = experiment((1, 1, 1, 1), replication_factor=replicas, num_instances=instances)
        exp.host.framework = framework
        exp.ipu.calibration["host_step_s"] = 0.0
        return throughput(exp, small).step_time_s

    feed = experiment().ipu.calibration["replica_feed_s"]
    assert feed > 0
    one, four = step(HostFramework.poptorch, 1), step(HostFramework.poptorch, 4)
    # 64 micro-batches, each waiting for 4 replicas' feeds: about 3 feeds more per micro-batch than one replica
    assert four - one == pytest.approx(64 * 3 * feed, rel=0.15)
    assert step(HostFramework.poptorch, 4, instances=4) == pytest.approx(one, rel=0.05)
    assert step(HostFramework.tensorflow, 4) < 0.5 * four


def test_io_tiles_do_not_overlap_an_interleaved_pipeline():
    base = experiment(pipeline__schedule=Schedule.interleaved, replication_factor=4, data__io_precision="float32")
    tiles = experiment(pipeline__schedule=Schedule.interleaved, replication_factor=4, data__io_precision="float32",
                       io__num_io_tiles=64)
    assert throughput(tiles).samples_per_s < throughput(base).samples_per_s


def test_half_partials_faster_than_float():
    assert throughput(experiment(partials_type=PartialsType.half)).samples_per_s > \
        throughput(experiment(partials_type=PartialsType.float)).samples_per_s


def test_replication_scales_sub_linearly_and_allreduce_share_falls_with_ga():
    one = throughput(experiment(replication_factor=1, gradient_accumulation=16)).samples_per_s
    four = throughput(experiment(replication_factor=4, gradient_accumulation=16)).samples_per_s
    assert 3.0 * one < four < 4 * one
    shares = []
    for ga in (16, 64, 256):
        f = throughput(experiment(replication_factor=4, gradient_accumulation=ga))
        shares.append(f.breakdown["all_reduce"] / f.step_time_s)
    assert shares == sorted(shares, reverse=True) and shares[0] > 0


def test_recomputation_costs_time_and_excludes_the_last_stage():
    none = throughput(experiment(recomputation__mode=RecomputationMode.none))
    pipe = throughput(experiment(recomputation__mode=RecomputationMode.pipeline))
    assert none.samples_per_s > pipe.samples_per_s
    assert none.breakdown["recompute"] == 0 < pipe.breakdown["recompute"]
    exp = experiment()
    g = graph()
    a = analyse(build_plan(exp, assign_stages(g.blocks, [2, 2, 2, 2])), g)
    assert a.ipus[3].pipeline["recompute"] == 0 < a.ipus[2].pipeline["recompute"]


def test_offchip_optimizer_state_slows_the_weight_update_and_rts_shards_it():
    on = throughput(experiment(replication_factor=4))
    off = throughput(experiment(replication_factor=4, tensor_locations__optimizer_state__on_chip=False))
    rts = throughput(experiment(replication_factor=4, tensor_locations__optimizer_state__on_chip=False,
                                tensor_locations__optimizer_state__replicated_tensor_sharding=True))
    assert off.breakdown["weight_update"] > on.breakdown["weight_update"]
    assert rts.breakdown["weight_update"] < off.breakdown["weight_update"]


def test_offchip_activations_stream_the_stash_with_and_without_recomputation():
    for mode in (RecomputationMode.none, RecomputationMode.pipeline):
        on = throughput(experiment(recomputation__mode=mode))
        off = throughput(experiment(recomputation__mode=mode, tensor_locations__activations__on_chip=False))
        assert off.breakdown["exchange"] > on.breakdown["exchange"]
        assert off.samples_per_s < on.samples_per_s


def test_bow_is_faster_than_mk2_by_about_the_clock_ratio():
    mk2 = throughput(experiment(gen="mk2")).samples_per_s
    bow = throughput(experiment(gen="bow")).samples_per_s
    assert 1.2 < bow / mk2 <= 1.85 / 1.33 + 1e-9


def test_step_events_cover_the_step():
    exp = experiment(replication_factor=4, gradient_accumulation=16)
    g = graph()
    stages = assign_stages(g.blocks, [2, 2, 2, 2])
    events = step_events(build_plan(exp, stages), g)
    f = estimate_throughput(build_plan(exp, stages), g)
    ends = max(e.start_s + e.duration_s for e in events)
    assert ends == pytest.approx(f.step_time_s, rel=1e-9)
    cats = {e.category for e in events}
    assert {"fwd", "bwd", "recompute", "exchange", "all_reduce", "weight_update"} <= cats
    assert {e.ipu for e in events} == {0, 1, 2, 3}


def test_inference_has_no_backward_or_update():
    exp = experiment(device_iterations=16)
    exp.training = False
    f = throughput(exp)
    assert f.breakdown["weight_update"] == f.breakdown["all_reduce"] == f.breakdown["recompute"] == 0
    assert sum(f.breakdown.values()) == pytest.approx(f.step_time_s, rel=1e-9)
    train = throughput(experiment(device_iterations=16))
    assert f.samples_per_s > 2 * train.samples_per_s


def test_no_prediction_exceeds_the_peak_flops_bound():
    for opts in ({}, {"recomputation__mode": RecomputationMode.none}, {"gradient_accumulation": 4096},
                 {"replication_factor": 4}, {"precision": "32.32", "partials_type": PartialsType.float}):
        f = throughput(experiment(**opts))
        assert f.samples_per_s < f.peak_flops_bound_samples_per_s



def test_sharded_execution_works_one_ipu_at_a_time():
    """Sharded execution over four IPUs under a PopTorch loop: the host call takes the first IPU's time (waiting
    for the host: host IO, not busy), the others work their own stage's passes only, a quarter of the stages' work
    each; the pipelined split keeps all busy."""
    def figures(schedule):
        exp = experiment(pipeline__schedule=Schedule(schedule), gradient_accumulation=4)
        exp.host.framework = HostFramework.poptorch
        return throughput(exp)

    sharded, pipelined = figures("sequential"), figures("grouped")
    assert sharded.breakdown["host_io"] * 4 > 0.5 * sharded.step_time_s  # the host call on the first IPU
    assert max(sharded.utilisation) < 0.1  # waiting for the host or the other IPUs
    # The IPUs' work overlaps in the pipeline: the same work in less time.
    assert pipelined.step_time_s < sharded.step_time_s
