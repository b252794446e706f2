"""What a stage keeps for its backward pass: FIFOs in a pipeline, ordinary tensors with a liveness without one."""
from __future__ import annotations

import copy
import functools

import pytest

from ipuexp.config.compose import load_experiment
from ipuexp.config.schema import ExperimentConfig, RecomputationMode
from ipuexp.emulator.memory import estimate_memory, plan_ipus
from ipuexp.emulator.stash import own_saved_bytes, stage_stash, unpipelined_held
from ipuexp.graph.stages import assign_stages
from ipuexp.graph.types import BlockCapture, Graph, TensorInfo
from ipuexp.execution.execution import build_plan

N = 4096  # float elements of every block boundary tensor
ACT = 2  # fp16 activations


def block(name: str, saves_input: bool = True) -> BlockCapture:
    """A block whose input and output hold N elements; it saves its input and two more tensors of that size."""
    t = TensorInfo(shape=[N], dtype="float32", elements=N)
    return BlockCapture(name=name, is_layer=True, parameters=64, parameter_tensors=1, largest_parameter=64,
                        fwd_flops=0, bwd_flops=0, saved_elements=3 * N, saved_int_bytes=0, peak_fwd_elements=5 * N,
                        inputs=[t], outputs=[t], saved_input_elements=N if saves_input else 0)


def chain(n: int = 4, saves_input: bool = True) -> Graph:
    return Graph(model="chain", micro_batch_size=1, blocks=[block(f"layer{i}", saves_input) for i in range(n)],
                 input_bytes_per_sample=4 * N, input_elements_per_sample=N, num_layers=n)


def test_backward_of_a_segment_holds_only_the_checkpoints_not_yet_consumed():
    # A checkpoint at every block: the backward pass of block j holds the checkpoints of blocks 0..j-1 beside its
    # own (which it saves, so the recomputed segment counts it); those of later blocks are freed already.
    cp = N * ACT
    held = unpipelined_held(chain().blocks, recompute=True, every_layer=True, act_bytes=ACT)
    assert held.bwd == held.recompute == held.fwd == [0, cp, 2 * cp, 3 * cp]
    # A block that does not save its input leaves the whole checkpoint beside its recomputed segment.
    held = unpipelined_held(chain(saves_input=False).blocks, recompute=True, every_layer=True, act_bytes=ACT)
    assert held.bwd == [cp, 2 * cp, 3 * cp, 4 * cp] and held.recompute == [0, cp, 2 * cp, 3 * cp]
    # One segment (the stage input its only checkpoint): held through every later step of the stage.
    held = unpipelined_held(chain(saves_input=False).blocks, recompute=True, every_layer=False, act_bytes=ACT)
    assert held.fwd == [0, cp, cp, cp] and held.recompute == [0, cp, cp, cp] and held.bwd == [cp] * 4


def test_without_recomputation_saved_tensors_live_from_forward_to_backward():
    g = chain()
    own = [own_saved_bytes(g.blocks, i, ACT) for i in range(4)]
    held = unpipelined_held(g.blocks, recompute=False, every_layer=False, act_bytes=ACT)
    assert held.fwd == held.bwd == [sum(own[:i + 1]) for i in range(4)]
    assert held.bwd[-1] == stage_stash(g.blocks, 1, False, False, ACT).entry_bytes  # all of it, at most


@functools.lru_cache(maxsize=None)
def _default() -> ExperimentConfig:
    return load_experiment()


def _plan(layers_per_ipu, every_layer: bool = True, mode: RecomputationMode = RecomputationMode.all):
    g = chain()
    exp = copy.deepcopy(_default())
    exp.data.micro_batch_size = 1
    exp.options.gradient_accumulation = 16
    exp.options.pipeline.layers_per_ipu = list(layers_per_ipu)
    exp.options.recomputation.mode = mode
    exp.options.recomputation.checkpoint_every_layer = every_layer
    stages = assign_stages(g.blocks, list(layers_per_ipu), None)
    plan = build_plan(exp, stages)
    return plan_ipus(plan, g), estimate_memory(plan, g)


def test_one_stage_has_no_fifo_its_checkpoints_are_not_always_live():
    # PopART stashes only in a pipeline; a stage alone keeps its checkpoints as ordinary tensors.
    (ipu,), mem = _plan([4])
    assert ipu.always_live["stash"] == 0
    by_step = {label: d.get("stash", 0) for label, d in ipu.steps}
    cp = N * ACT
    assert [by_step[f"bwd layer{i}"] for i in (3, 2, 1, 0)] == [3 * cp, 2 * cp, cp, 0]
    assert by_step["weight update"] == 0
    _, peak = ipu.peak_step()
    assert mem.ipus[0].breakdown["stash"] == peak["stash"] < ipu.stash[0].entry_bytes
    assert mem.ipus[0].not_always_live_bytes == sum(peak.values())


@pytest.mark.parametrize("mode", [RecomputationMode.pipeline, RecomputationMode.none])
def test_a_pipeline_keeps_its_fifos_always_live(mode):
    plans, mem = _plan([2, 2], mode=mode)
    for ipu, m in zip(plans, mem.ipus):
        assert ipu.always_live["stash"] == sum(x.bytes for x in ipu.stash) == m.breakdown["stash"] > 0
        assert all(d.get("stash", 0) == 0 for _, d in ipu.steps)


def test_one_stage_without_recomputation_peaks_with_every_saved_tensor():
    (ipu,), _ = _plan([4], mode=RecomputationMode.none)
    # The backward of the last block still needs what every block saved; after the first block's, nothing is.
    steps = dict(ipu.steps)
    assert steps["bwd layer3"]["stash"] == ipu.stash[0].entry_bytes
    assert steps["weight update"].get("stash", 0) == 0
