"""The throughput model on the published recipes (real captured models): the behaviours the docs describe."""
from __future__ import annotations

import math

import pytest

from ipuexp.config.compose import compose_recipe as compose
from ipuexp.config.store import recipe_names
from ipuexp.emulator.timing import estimate_throughput
from ipuexp.graph.capture import capture
from ipuexp.graph.stages import assign_stages
from ipuexp.execution.execution import build_plan

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def evaluate(tmp_path_factory):
    cache = str(tmp_path_factory.getbasetemp() / "captures")

    def run(recipe: str, *overrides: str):
        exp = compose(recipe, overrides)
        graph = capture(exp.model, exp.data.micro_batch_size, cache_dir=cache)
        p = exp.options.pipeline
        return estimate_throughput(build_plan(exp, assign_stages(graph.blocks, p.layers_per_ipu, p.device_mapping)), graph)

    return run


def test_every_recipe_has_a_bounded_prediction(evaluate):
    for name in recipe_names():
        f = evaluate(name)
        assert math.isfinite(f.samples_per_s) and f.samples_per_s > 0, name
        assert f.samples_per_s < f.peak_flops_bound_samples_per_s, name
        assert sum(f.breakdown.values()) == pytest.approx(f.step_time_s, rel=1e-9), name


def test_bert_large_gradient_accumulation(evaluate):
    sps = [evaluate("bert_large", f"options.gradient_accumulation={ga}").samples_per_s
           for ga in (16, 64, 256, 1024, 2048, 8192)]
    assert sps == sorted(sps)
    assert sps[-1] / sps[-2] < 1.01 < sps[1] / sps[0]


def test_bert_large_schedules_and_partials(evaluate):
    # TensorFlow's loop: the one framework with all three schedules
    sps = {s: evaluate("bert_large", f"options.pipeline.schedule={s}", "host.framework=tensorflow").samples_per_s
           for s in ("grouped", "interleaved", "sequential")}
    assert sps["grouped"] > sps["interleaved"] > sps["sequential"]
    assert evaluate("bert_large", "options.partials_type=half").samples_per_s > \
        evaluate("bert_large", "options.partials_type=float").samples_per_s


def test_bert_large_replication(evaluate):
    # With the optimizer state on chip and unsharded, each replica does the same work plus the all-reduce.
    unsharded = ("options.tensor_locations.optimizer_state.on_chip=true",
                 "options.tensor_locations.optimizer_state.replicated_tensor_sharding=false")
    for ga in (64, 1024):
        one = evaluate("bert_large", *unsharded, "options.replication_factor=1", f"options.gradient_accumulation={ga}")
        four = evaluate("bert_large", *unsharded, "options.replication_factor=4", f"options.gradient_accumulation={ga}")
        assert 3.0 * one.samples_per_s < four.samples_per_s < 4 * one.samples_per_s
    # With RTS the off-chip optimizer state streams 1/R per replica, so the update gets cheaper as R grows.
    rts = [evaluate("bert_large", f"options.replication_factor={r}", "options.gradient_accumulation=64")
           for r in (1, 4)]
    assert rts[1].breakdown["weight_update"] < rts[0].breakdown["weight_update"]
    shares = [evaluate("bert_large", f"options.gradient_accumulation={ga}") for ga in (16, 256, 2048)]
    ratios = [f.breakdown["all_reduce"] / f.step_time_s for f in shares]
    assert ratios == sorted(ratios, reverse=True)


def test_device_iterations_never_lower_throughput(evaluate):
    for recipe in ("resnet50", "mnist_pipeline"):
        sps = [evaluate(recipe, f"options.device_iterations={d}").samples_per_s for d in (1, 4, 16)]
        assert sps == sorted(sps), recipe


def test_resnet50_io_tiles(evaluate):
    # Float32 images over a host link shared by four replicas: IO tiles hide the transfer (seed 001 4.4.2);
    # with no host data they only take tiles from compute.
    base = ("data.io_precision=float32", "options.num_instances=16")
    io_bound = [evaluate("resnet50", *base, f"options.io.num_io_tiles={t}").samples_per_s for t in (0, 128)]
    assert io_bound[1] > io_bound[0]
    synthetic = [evaluate("resnet50", "options.synthetic_data=true", f"options.io.num_io_tiles={t}").samples_per_s
                 for t in (0, 128)]
    assert 0.85 * synthetic[0] < synthetic[1] < synthetic[0]
