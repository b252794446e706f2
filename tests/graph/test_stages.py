"""Stages under PopART: consecutive stages on one IPU are one (PopART mergeConsecutivePipelineStages); TensorFlow's
pipelines keep theirs."""
from __future__ import annotations

from types import SimpleNamespace

from ipuexp.config.compose import compose_run
from ipuexp.graph.stages import assign_stages, merges_stages

ROBERTA = "roberta_base_squad2_sl384_mk2_pod16_optimum"


def _blocks(layers: int) -> list:
    def block(name: str, is_layer: bool) -> SimpleNamespace:  # assign_stages reads a block's is_layer only
        return SimpleNamespace(name=name, is_layer=is_layer)
    return [block("embeddings", False), *(block(f"layer{i}", True) for i in range(layers)), block("heads", False)]


def test_consecutive_stages_on_one_ipu_merge_under_popart():
    blocks = _blocks(6)
    # One block a stage, as AutoIncrement numbers them: IPU 0, 1, 1, 2, 2, 2 and the heads back on IPU 0.
    stages = assign_stages(blocks, [1, 1, 1, 1, 1, 1], [0, 1, 1, 2, 2, 2, 0], merge=True)
    assert [s.ipu for s in stages] == [0, 1, 2, 0]
    assert [[b.name for b in s.blocks] for s in stages] == [
        ["embeddings", "layer0"], ["layer1", "layer2"], ["layer3", "layer4", "layer5"], ["heads"]]
    assert [s.index for s in stages] == [0, 1, 2, 3]
    # Without PopART (TensorFlow's sequential schedule on one IPU) every stage stays.
    kept = assign_stages(blocks, [1, 1, 1, 1, 1, 1], [0, 1, 1, 2, 2, 2, 0])
    assert [s.ipu for s in kept] == [0, 1, 1, 2, 2, 2, 0]


def test_which_frameworks_merge():
    assert merges_stages("optimum") and merges_stages("poptorch") and merges_stages("popart")
    assert not merges_stages("tensorflow")


def test_autoincrement_plans_one_stage_per_ipu():
    from ipuexp.execution.execution import plan_for
    from ipuexp.graph.capture import capture

    exp = compose_run(ROBERTA)
    assert exp.options.pipeline.auto_stage.value == "auto_increment"
    graph = capture(exp.model, exp.data.micro_batch_size, cache_dir=exp.engine.cache_dir)
    plan = plan_for(exp, graph)
    # PopART's stash depths, 2 * (stages to the end) + 1, count the four IPUs' stages, not the 14 blocks'.
    assert [s.ipu for s in plan.stages] == [0, 1, 2, 3]
    assert plan.stash_depths == (7, 5, 3, 1)
