"""Toy graphs and experiments for the memory model's tests: a transformer-like layer of hidden size ``H`` over
``S`` tokens, stacked, and the experiment that places them one layer per IPU."""
from __future__ import annotations

import copy
import functools

from ipuexp.config.compose import load_experiment
from ipuexp.config.schema import ExperimentConfig, Optimizer
from ipuexp.emulator.memory import estimate_memory
from ipuexp.graph.stages import assign_stages
from ipuexp.graph.types import BlockCapture, Graph, OpRecord, TensorInfo
from ipuexp.execution.execution import build_plan

H = 256  # hidden size of the toy transformer-like layer
S = 64   # tokens per sample


def _t(shape, dtype="float32"):
    n = 1
    for d in shape:
        n *= d
    return TensorInfo(shape=list(shape), dtype=dtype, elements=n)


def layer(name: str, mbs: int, hidden: int = H, is_layer: bool = True) -> BlockCapture:
    """A feed-forward layer: [mbs*S, hidden] x [hidden, 4*hidden] and back, GELU between."""
    m = mbs * S
    f = 4 * hidden
    ops = [
        OpRecord("aten.addmm", "matmul", "fwd", 1, 2 * m * hidden * f, m * hidden + hidden * f + f, m * f,
                 [m, hidden, f]),
        OpRecord("aten.gelu", "elementwise", "fwd", 1, m * f, m * f, m * f),
        OpRecord("aten.addmm", "matmul", "fwd", 1, 2 * m * f * hidden, m * f + f * hidden + hidden, m * hidden,
                 [m, f, hidden]),
        OpRecord("aten.view", "data", "fwd", 2, 0, 0, 0),
        OpRecord("aten.mm", "matmul", "bwd", 1, 2 * m * hidden * f, m * hidden + hidden * f, m * f, [m, hidden, f]),
        OpRecord("aten.mm", "matmul", "bwd", 1, 2 * m * hidden * f, m * f + m * hidden, hidden * f, [f, m, hidden]),
        OpRecord("aten.gelu_backward", "elementwise", "bwd", 1, m * f, 2 * m * f, m * f),
        OpRecord("aten.mm", "matmul", "bwd", 1, 2 * m * hidden * f, m * hidden + f * hidden, m * f, [m, hidden, f]),
        OpRecord("aten.mm", "matmul", "bwd", 1, 2 * m * hidden * f, m * hidden + m * f, hidden * f, [hidden, m, f]),
    ]
    return BlockCapture(
        name=name, is_layer=is_layer, parameters=2 * hidden * f + hidden + f, parameter_tensors=4,
        largest_parameter=hidden * f, fwd_flops=4 * m * hidden * f, bwd_flops=8 * m * hidden * f,
        saved_elements=m * hidden + 2 * m * f, saved_int_bytes=0, peak_fwd_elements=m * hidden + 3 * m * f,
        inputs=[_t([mbs, S, hidden]), _t([mbs, S], "int32")], outputs=[_t([mbs, S, hidden]), _t([mbs, S], "int32")],
        ops=ops, op_count_fwd=5, op_count_bwd=4)


def graph(mbs: int = 4, layers: int = 4, hidden: int = H) -> Graph:
    blocks = [layer(f"layer{i}", mbs, hidden) for i in range(layers)]
    return Graph(model="toy", micro_batch_size=mbs, blocks=blocks, input_bytes_per_sample=S * hidden * 4,
                 input_elements_per_sample=S * hidden, num_layers=layers)


@functools.lru_cache(maxsize=None)
def _default() -> ExperimentConfig:
    """The composed default configuration (Mk2 with its fitted calibration, which the matmul planner uses)."""
    return load_experiment()


def experiment(layers_per_ipu=(1, 1, 1, 1), **options) -> ExperimentConfig:
    exp = copy.deepcopy(_default())
    exp.options.pipeline.layers_per_ipu = list(layers_per_ipu)
    exp.options.gradient_accumulation = 64
    exp.optimizer.name = Optimizer.adam
    for key, value in options.items():
        target = exp.options
        *path, last = key.split("__")
        for p in path:
            target = getattr(target, p)
        setattr(target, last, value)
    return exp


def memory(exp: ExperimentConfig, g: Graph):
    exp.data.micro_batch_size = g.micro_batch_size
    stages = assign_stages(g.blocks, exp.options.pipeline.layers_per_ipu, exp.options.pipeline.device_mapping)
    return estimate_memory(build_plan(exp, stages), g)


def category(mem, name: str) -> int:
    return sum(i.breakdown[name] for i in mem.ipus)


# Stash FIFOs -----------------------------------------------------------------------------------------------
