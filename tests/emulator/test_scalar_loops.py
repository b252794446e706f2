"""Element-wise ops whose PopLibs vertex is a scalar loop: a divide (PopART's ``Div``, never folded to a multiply)
and the forward of a select (``masked_fill``/``where`` as PopART's ``Where``) cost PopLibs' own cycles per element;
every other element-wise op keeps the engine's vector rate."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.emulator.test_power import _records


@pytest.fixture(scope="module")
def ctx():
    from tests.emulator.test_vmac import _graph, _graph_model  # noqa: F401 (a small plan to take a tile context)
    from ipuexp.config.compose import load_experiment
    from ipuexp.execution.execution import plan_for, tile_context

    exp = load_experiment("model.name=custom", "model.target=tests.emulator.test_vmac:_graph_model")
    return dataclasses.replace(tile_context(plan_for(exp, _graph()), 0), activation_bytes=2)


def test_a_divide_by_a_scalar_costs_poplibs_broadcast_divide(ctx):
    from ipuexp.emulator.cost import DIVIDE_CYCLES, op_cycles

    divide, = _records(lambda x: x / 8.0)
    multiply, = _records(lambda x: x * 0.125)
    assert op_cycles(divide, ctx).compute == pytest.approx(1024 * 3072 * DIVIDE_CYCLES[(2, True)] / ctx.compute_tiles)
    assert op_cycles(divide, ctx).compute > 2 * op_cycles(multiply, ctx).compute
    # the same supersteps: only the vertex is slower
    assert op_cycles(divide, ctx).exchange == op_cycles(multiply, ctx).exchange


def test_a_divide_by_a_tensor_costs_the_binary_divide(ctx):
    from ipuexp.emulator.cost import DIVIDE_CYCLES, op_cycles

    recorder_records = _records(lambda x: x / (x + 1.0))
    divide = next(r for r in recorder_records if r.op == "aten.div")
    assert op_cycles(divide, ctx).compute == pytest.approx(1024 * 3072 * DIVIDE_CYCLES[(2, False)] / ctx.compute_tiles)


def test_a_forward_select_costs_poplibs_select_and_its_gradient_does_not(ctx):
    from ipuexp.emulator.cost import SELECT_CYCLES, op_cycles

    mask = torch.empty(1024, 3072, dtype=torch.bool, device="meta")
    fill, = _records(lambda x: x.masked_fill(mask, -10000.0))
    assert op_cycles(fill, ctx).compute == pytest.approx(1024 * 3072 * SELECT_CYCLES / ctx.compute_tiles)
    backward = dataclasses.replace(fill, phase="bwd")
    assert op_cycles(backward, ctx).compute < op_cycles(fill, ctx).compute / 2


def test_bert_and_gpt2_scale_their_scores_by_a_multiply_and_vit_divides():
    """Graphcore's BERT and GPT-2 multiply by 1/sqrt(d) ("reciprocal multiply for speed") and GPT-2 subtracts its
    causal mask arithmetically; its ViT divides."""
    from ipuexp.config.schema import ModelConfig
    from ipuexp.graph.capture import capture_model
    from ipuexp.models import build_model

    def score_ops(cfg):
        graph = capture_model(lambda: build_model(cfg), 2)
        layer = next(b for b in graph.blocks if b.is_layer)
        return {op.op for op in layer.ops if op.phase == "fwd"}

    assert "aten.div" not in score_ops(ModelConfig(name="bert", size="base", num_layers=1, sequence_length=128))
    gpt2 = score_ops(ModelConfig(name="gpt2", size="small", num_layers=1, sequence_length=128))
    assert not gpt2 & {"aten.div", "aten.masked_fill", "aten.where"}
    assert "aten.div" in score_ops(ModelConfig(name="vit", size="b16", num_layers=1))
