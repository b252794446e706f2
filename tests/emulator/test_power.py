"""``pow`` as a PopTorch model runs it: PopART's ``Pow`` hands PopLibs its exponent as a tensor, so PopLibs' expression
optimiser never makes it a vectorised square or sqrt: every power, x ** 2 included, runs POWER one element at a time."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from ipuexp.graph.recorder import OpRecorder


@pytest.mark.parametrize("exponent", [3.0, 2, 0.5, -1, 1.5])
def test_every_power_runs_element_at_a_time(exponent):
    record, = _records(lambda x: torch.pow(x, exponent))
    assert record.kind == "power"
    record, = _records(lambda x: x * 2.0)
    assert record.kind == "elementwise"


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
    double, = _records(lambda x: x * 2.0)
    exp = load_experiment("model.name=custom", "model.target=tests.emulator.test_vmac:_graph_model")
    ctx = dataclasses.replace(tile_context(plan_for(exp, _graph()), 0), activation_bytes=2)
    cycles = op_cycles(cube, ctx)
    assert cycles.compute == pytest.approx(1024 * 3072 * POWER_CYCLES_HALF / ctx.compute_tiles)
    assert cycles.compute > 100 * op_cycles(double, ctx).compute


def test_gpt2s_gelu_new_records_its_power():
    pytest.importorskip("transformers")
    from ipuexp.config.schema import HFModelConfig, ModelConfig
    from ipuexp.graph.capture import capture_model
    from ipuexp.models import build_model

    cfg = ModelConfig(name="hf", hf=HFModelConfig(config="gpt2-medium", task="causal-lm"), num_layers=2)
    graph = capture_model(lambda: build_model(cfg), 1)
    layer = next(b for b in graph.blocks if b.is_layer)
    powers = [op for op in layer.ops if op.kind == "power"]
    # x ** 3 forward, and its gradient's x ** 2, which PopART's PowArg0Grad pattern computes with Pow as well
    assert sorted(op.phase for op in powers) == ["bwd", "fwd"]
    assert all(op.elements_written == 128 * 4096 for op in powers)
