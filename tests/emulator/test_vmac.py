"""Depthwise convolutions on the vertical-MAC vertex, as PopLibs' planner runs them, and their FLOPs."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from ipuexp.emulator.vmac import vmac_cycles
from ipuexp.graph.capture import capture_model
from ipuexp.models.blocks import Block, InputSpec, PipelinedModel


class _Depthwise(torch.nn.Module):
    def __init__(self, channels: int = 64) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, channels, 7, padding=3, groups=channels)

    def forward(self, x, labels):
        return self.conv(x), labels


class _Stem(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(64, 64, 1)

    def forward(self, x, labels):
        return self.conv(x), labels


class _Loss(torch.nn.Module):
    def forward(self, x, labels):
        return x.float().mean(), x


def _graph():
    return capture_model(_graph_model, 2)


def test_a_grouped_backward_counts_one_product_per_gradient():
    block = _graph().blocks[1]
    # torch's flop counter counts the input gradient of a grouped convolution as if ungrouped (64x here)
    assert block.bwd_flops == 2 * block.fwd_flops == 2 * 2 * (2 * 14 * 14 * 64) * 49


def test_the_vertical_mac_estimate(monkeypatch):
    from ipuexp.config.compose import load_experiment
    from ipuexp.execution.execution import plan_for, tile_context

    graph = _graph()
    exp = load_experiment("model.name=custom", "model.target=tests.emulator.test_vmac:_graph_model")
    ctx = dataclasses.replace(tile_context(plan_for(exp, graph), 0), partial_bytes=2, vector_efficiency=1.0)
    m, k = 2 * 14 * 14 * 64, 49
    compute, _ = vmac_cycles(m, k, 1, m * k, ctx)
    # 8 groups per pass: 7 + 15 + 3 + 3 x 48 worker cycles, over the compute tiles
    assert compute == pytest.approx(-(-m // 8) * (7 + 15 + 3 + 3 * 48) / ctx.compute_tiles)
    float_ctx = dataclasses.replace(ctx, partial_bytes=4)
    assert vmac_cycles(m, k, 1, m * k, float_ctx)[0] == pytest.approx(-(-m // 4) * (7 + 5 + 3 + 2 * 48)
                                                                     / ctx.compute_tiles)


def _graph_model():
    return PipelinedModel([Block("stem", _Stem()), Block("dw", _Depthwise(), is_layer=True), Block("loss", _Loss())],
                          name="dw",
                          input_spec=[InputSpec("x", (64, 14, 14)),
                                      InputSpec("labels", (), "int32", is_label=True, high=2)])
