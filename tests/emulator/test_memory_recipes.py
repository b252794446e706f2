"""Memory model on the published recipes: what ran on hardware fits, what Graphcore says does not fit does not."""
from __future__ import annotations

import re
from typing import List

import pytest

from ipuexp.config.compose import compose_run
from ipuexp.config.compose import load_experiment
from ipuexp.importers import read
from ipuexp.importers.recipe import write
from ipuexp.config.schema import RecomputationMode
from ipuexp.config.user_recipes import ENV_VAR
from ipuexp.emulator import code_size
from ipuexp.emulator.memory import estimate_memory, plan_ipus
from ipuexp.graph.capture import capture
from ipuexp.graph.stages import assign_stages
from ipuexp.execution.execution import build_plan
from published import DATA

pytestmark = pytest.mark.slow  # captures BERT, GPT-2, ResNet-50 and ViT on meta tensors (seconds each)

# Configurations Graphcore ran on hardware: published configs and benchmarks, and the calibration runs.
PUBLISHED = ["bert_large", "bert_large_sl384", "bert_base", "resnet50", "vit_b16", "bert_large_pod64",
             "bert_large_sl384_pod64", "gpt2_medium", "gpt2_medium_pod64", "resnet50_pod64", "vit_b16_pod64",
             "calib_bert_base_ph1_bow_pod16_pytorch", "calib_resnet50_bow_pod16_tf1",
             "calib_resnet50_mk2_pod16_tf1_mlperf11", "calib_bert_large_ph1_bow_pod16_tf2",
             "calib_bert_large_ph2_sl384_bow_pod16_tf1", "calib_resnet50_mk2_pod128_tf1_mlperf11",
             "calib_resnet50_mk2_pod256_tf1_mlperf11", "calib_vit_b16_finetune_bow_pod16_pytorch"]

# Graphcore's TensorFlow BERT applications put a recomputation checkpoint after every encoder layer (their recipes
# say so, with the source).
TF_BERT = ["calib_bert_large_ph1_bow_pod16_tf2", "calib_bert_large_ph2_sl384_bow_pod16_tf1"]


def experiment(recipe: str, *overrides: str):
    if recipe.startswith("calib_"):
        return compose_run(recipe[len("calib_"):], overrides)
    return load_experiment(f"+recipe={recipe}", *overrides)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("captures"))


def evaluate(exp, cache: str):
    graph = capture(exp.model, exp.data.micro_batch_size, cache_dir=cache)
    pipe = exp.options.pipeline
    stages = assign_stages(graph.blocks, pipe.layers_per_ipu, pipe.device_mapping)
    return graph, stages, estimate_memory(build_plan(exp, stages), graph)


@pytest.mark.parametrize("recipe", PUBLISHED)
def test_published_configurations_fit(recipe, cache_dir):
    exp = experiment(recipe)
    _, stages, mem = evaluate(exp, cache_dir)
    assert mem.fits, "\n".join(mem.report)
    assert len(mem.ipus) == len({s.ipu for s in stages})
    for ipu in mem.ipus:
        assert ipu.fits and ipu.max_tile_bytes <= exp.ipu.memory_per_tile_bytes
        assert ipu.total_bytes <= ipu.capacity_bytes
        assert ipu.breakdown["weights"] > 0 and ipu.breakdown["control_code"] > 0


@pytest.mark.parametrize("recipe", TF_BERT)
def test_tensorflow_bert_runs_recompute_one_layer_at_a_time(recipe, cache_dir):
    exp = experiment(recipe)
    graph, stages, mem = evaluate(exp, cache_dir)
    assert mem.fits, "\n".join(mem.report)
    assert all(ipu.max_tile_bytes <= exp.ipu.memory_per_tile_bytes for ipu in mem.ipus)
    # One layer is recomputed at a time: the encoder-only IPUs (1 to 3) hold at most about one layer's saved
    # activations (fp16) at their peak, not their seven layers'.
    for plan in plan_ipus(build_plan(exp, stages), graph)[1:]:
        _, peak = plan.peak_step()
        layer = plan.stages[0].blocks[0]
        assert layer.is_layer and peak["activations"] < 2 * (layer.saved_elements * 2 + layer.saved_int_bytes)


CNN_CONFIGS = DATA / "graphcore-configs/examples/HEAD_vision_cnns_pytorch_train_configs.yml"


@pytest.mark.parametrize("config", ["resnet50", "resnet50-pod4", "resnet50-pod64"])
def test_pytorch_cnn_resnet50_on_one_ipu_fits(config, cache_dir, tmp_path, monkeypatch):
    # Graphcore's PyTorch CNN application trains ResNet-50 on one IPU per replica, no pipeline, with RecomputeAll
    # at checkpoints after the bottleneck blocks; the configurations ran on IPU-POD4, POD16 and POD64.
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    _, exp = write(read(CNN_CONFIGS, config), "r50", overwrite=True)
    graph, stages, mem = evaluate(exp, cache_dir)
    assert len(stages) == 1 and mem.fits, "\n".join(mem.report)
    # No pipeline, no FIFOs: at the peak only the checkpoints the backward pass has not consumed yet are live.
    (plan,) = plan_ipus(build_plan(exp, stages), graph)
    _, peak = plan.peak_step()
    assert plan.always_live["stash"] == 0 and 0 < peak["stash"] < plan.stash[0].entry_bytes
    # Without recomputation every activation saved for backward (about 750 MiB in fp16 at micro-batch 18) is live
    # at the start of the backward pass, beside the variables and code: that cannot fit in 900 MiB.
    exp.options.recomputation.mode = RecomputationMode.none
    _, _, without = evaluate(exp, cache_dir)
    assert not without.fits


def test_bert_large_does_not_fit_without_recomputation(cache_dir):
    # Seed 001 section 5.3.1: "BERT Large would not fit in memory without recomputation".
    exp = experiment("bert_large", "options.recomputation.mode=none")
    _, _, mem = evaluate(exp, cache_dir)
    assert not mem.fits
    failing = [line for line in mem.report if line.startswith("Out of memory on tile")]
    assert failing and all(re.fullmatch(r"Out of memory on tile \d+: \d+ bytes used but tiles only have 638976 "
                                        r"bytes of memory", line) for line in failing)
    for line in mem.report:
        if "largest:" in line:
            assert line.split("largest:")[1].split()[0] in ("stash", "activations")
    assert any("options.recomputation.mode=pipeline" in line for line in mem.report)


def _stash_entries(exp, cache: str) -> List[int]:
    graph = capture(exp.model, exp.data.micro_batch_size, cache_dir=cache)
    stages = assign_stages(graph.blocks, exp.options.pipeline.layers_per_ipu, exp.options.pipeline.device_mapping)
    return [x.entry_bytes for plan in plan_ipus(build_plan(exp, stages), graph) for x in plan.stash]


def test_stash_fifo_entry_grows_eightfold_from_micro_batch_1_to_8(cache_dir):
    # Seed 001 Table 5.1: BERT-Large FIFO buffers of 2.0 MB at batch size 1 are 16.0 MB at batch size 8.
    one = _stash_entries(experiment("bert_large", "data.micro_batch_size=1"), cache_dir)
    eight = _stash_entries(experiment("bert_large", "data.micro_batch_size=8"), cache_dir)
    assert len(one) == len(eight) == 5
    assert all(b == 8 * a for a, b in zip(one, eight))


def test_table_4_1_reference_units_are_the_bert_large_capture(cache_dir):
    # The fitting reference of engine/code_size.py: BERT-Large in the configuration of Table 4.1.
    exp = experiment("bert_large", "options.replication_factor=1", "options.embedding_serialization_factor=5")
    graph, stages, _ = evaluate(exp, cache_dir)
    plans = plan_ipus(build_plan(exp, stages), graph)
    assert sum(p.units.ops for p in plans) == code_size.REF_OPS
    assert sum(p.units.host_tensors for p in plans) == code_size.REF_HOST_TENSORS
    assert sum(p.units.boundary_tensors for p in plans) == code_size.REF_BOUNDARY_TENSORS
    assert sum(p.units.parameter_tensors for p in plans) == code_size.REF_PARAMETER_TENSORS


def test_bert_large_code_follows_table_4_1(cache_dir):
    totals = {}
    for replicas in (1, 4):
        exp = experiment("bert_large", f"options.replication_factor={replicas}",
                         "options.embedding_serialization_factor=5")
        _, _, mem = evaluate(exp, cache_dir)
        totals[replicas] = {c: sum(i.breakdown[c] for i in mem.ipus) for c in code_size.CODE_CATEGORIES}
    assert totals[1]["control_code"] == pytest.approx(code_size.TABLE_4_1_CONTROL[0], rel=1e-3)
    assert totals[4]["internal_exchange_code"] == pytest.approx(code_size.TABLE_4_1_INTERNAL_EXCHANGE[1], rel=1e-3)
    ratio = totals[4]["global_exchange_code"] / totals[1]["global_exchange_code"]
    assert ratio == pytest.approx(4.5, abs=0.05)  # "increased ... by a factor of 4" (4,657,516 / 1,035,988)
