"""``pow`` as PopLibs runs it: constant exponents its expression optimiser maps to vectorised unary ops (square,
sqrt, ...) cost a vector pass; any other power (GPT-2's ``gelu_new``: x ** 3) runs POWER, one element at a time."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from ipuexp.graph.recorder import OpRecorder, scalar_power


@pytest.mark.parametrize("exponent, scalar", [(3.0, True), (2, False), (0.5, False), (-1, False), (1.5, True)])
def test_which_powers_run_element_at_a_time(exponent, scalar):
    assert scalar_power((torch.empty(1), exponent)) is scalar
    assert scalar_power((torch.empty(1), torch.empty(1))) is True


def _records(fn):
    recorder = OpRecorder(set())
    recorder.start("fwd", [])
    x = torch.empty(1024, 3072, device="meta")
    with recorder:
        fn(x)
    return list(recorder.records.values())


def test_a_cubic_power_costs_poplibs_power_cycles():
    from ipuexp.emulator.cost import POWER_CYCLES_HALF, op_cycles
    from tests.emulator.test_vmac import _graph, _graph_model  # noqa: F401 (a small plan to take a tile context)
    from ipuexp.config.compose import load_experiment
    from ipuexp.execution.execution import plan_for, tile_context

    cube, = _records(lambda x: torch.pow(x, 3.0))
    square, = _records(lambda x: torch.pow(x, 2))
    assert (cube.kind, square.kind) == ("power", "elementwise")
    exp = load_experiment("model.name=custom", "model.target=tests.emulator.test_vmac:_graph_model")
    ctx = dataclasses.replace(tile_context(plan_for(exp, _graph()), 0), activation_bytes=2)
    cycles = op_cycles(cube, ctx)
    assert cycles.compute == pytest.approx(1024 * 3072 * POWER_CYCLES_HALF / ctx.compute_tiles)
    assert cycles.compute > 100 * op_cycles(square, ctx).compute


def test_gpt2s_gelu_new_records_its_power():
    pytest.importorskip("transformers")
    from ipuexp.config.schema import HFModelConfig, ModelConfig
    from ipuexp.graph.capture import capture_model
    from ipuexp.models import build_model

    cfg = ModelConfig(name="hf", hf=HFModelConfig(config="gpt2-medium", task="causal-lm"), num_layers=2)
    graph = capture_model(lambda: build_model(cfg), 1)
    layer = next(b for b in graph.blocks if b.is_layer)
    powers = [op for op in layer.ops if op.kind == "power"]
    assert [op.phase for op in powers] == ["fwd"] and powers[0].elements_written == 128 * 4096
