"""Execution plans: stages by the analytic engine's rule, recomputation and output-mode resolution, bad input."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from functional_fixtures import experiment, tiny_model

from ipuexp.training.plan import make_plan, stage_blocks
from ipuexp.graph.stages import assign_stages


def names(model, stages):
    return [[model.blocks[i].name for i in s] for s in stages]


def test_stages_follow_assign_stages():
    model = tiny_model(layers=4)
    assert names(model, stage_blocks(list(model.blocks), [2, 1, 1], None)) == [
        ["embed", "L0", "L1"], ["L2"], ["L3", "head"]]
    # one extra device_mapping entry puts the head in a stage of its own (BERT's [0, 1, 2, 3, 0])
    assert names(model, stage_blocks(list(model.blocks), [1, 1, 1, 1], [0, 1, 2, 3, 0])) == [
        ["embed", "L0"], ["L1"], ["L2"], ["L3"], ["head"]]
    assert names(model, stage_blocks(list(model.blocks), [], None)) == [[b.name for b in model.blocks]]
    # the same rule as the analytic engine's, applied to anything with is_layer
    shadow = [SimpleNamespace(name=b.name, is_layer=b.is_layer) for b in model.blocks]
    ref = assign_stages(shadow, [3, 1], None)
    assert names(model, stage_blocks(list(model.blocks), [3, 1], None)) == [[b.name for b in s.blocks] for s in ref]


@pytest.mark.parametrize("layers,mapping,message", [
    ([2, 1], None, r"options.pipeline.layers_per_ipu: \[2, 1\] is not allowed; allowed: counts that add up to "
                   r"the model's 4 layers"),
    ([2, 2], [0, 1, 2, 3], r"options.pipeline.device_mapping: \[0, 1, 2, 3\] is not allowed"),
])
def test_bad_stage_configuration(layers, mapping, message):
    model = tiny_model(layers=4)
    with pytest.raises(AssertionError):  # validated with the config; an invariant here
        stage_blocks(list(model.blocks), layers, mapping)


def test_recomputation_modes():
    blocks = list(tiny_model().blocks)
    p = make_plan(experiment(rec="pipeline"), blocks)
    assert p.checkpoint_stages and p.checkpoint_blocks == ()
    single = make_plan(experiment(rec="pipeline", layers_per_ipu=[]), blocks)
    assert not single.checkpoint_stages  # PopTorch recomputes only a pipelined (multi-IPU) model
    every = make_plan(experiment(rec="pipeline", every_layer=True), blocks)
    assert every.checkpoint_blocks == (1, 2, 3, 4) and not every.checkpoint_stages
    full = make_plan(experiment(rec="all"), blocks)
    assert full.checkpoint_blocks == tuple(range(6))
    none = make_plan(experiment(rec="none", every_layer=True), blocks)
    assert none.checkpoint_blocks == () and not none.checkpoint_stages


def test_plan_fields():
    p = make_plan(experiment(out="default", reduction="sum", precision="16.32", sr=True, ls=64.0, r=4, inst=2,
                             ga=3, di=5, mbs=2), list(tiny_model().blocks))
    assert p.output_mode == "final"  # PopTorch's default for training
    assert p.reduction == "sum" and p.loss_scaling == 64.0
    assert p.precision.half_compute and not p.precision.half_weights and p.precision.stochastic_rounding
    assert (p.layout.samples_per_call, p.layout.local_replicas) == (2 * 3 * 5 * 4, 2)
    assert p.num_stages == 3
