"""Stash FIFOs: what one entry of a pipeline stage's stash holds (how many entries, the FIFO depth, is the
schedule's: ``ipuexp.execution.schedule.stash_depth``).

IPU optimisation guide section 5.3.2 and TF2 IPU guide section 5.1.5: with recomputation only the recomputation
checkpoints are stashed (a pipeline stage's input is always one, PopTorch adds one per
``recomputationCheckpoint``); without it every activation saved for backward is, each tensor once per stage even
when two consecutive blocks both save it.

A graph of one stage is not pipelined, so it has no FIFOs: PopART's pipeline transform (graphcore/popart
``willow/src/transforms/pipeline.cpp``), which adds the stash and restore ops, runs only with ``enablePipelining``
(``Ir::prepare`` in ``willow/src/ir.cpp``), which PopTorch sets only for a graph on more than one IPU
(graphcore/poptorch ``popart_compiler/source/Compiler.cpp``). The recomputed ops run again in the backward pass
from the forward pass's checkpoint tensors themselves (explicit recomputation clones them there:
``willow/src/transforms/explicitrecompute.cpp``). So the checkpoints (or, without recomputation, the saved
activations) are ordinary tensors, live from the forward pass that makes them to the backward pass that last
reads them, not always live (IPU optimisation guide section 3.3): ``unpipelined_held``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import List, Sequence, Tuple

from ipuexp.graph.types import BlockCapture, BlockKey
from ipuexp.execution.precision import float_elements, tensor_bytes


def segment_starts(blocks: Sequence[BlockCapture], every_layer: bool) -> List[int]:
    """Indices of the blocks whose inputs are recomputation checkpoints within one stage.

    The stage input is always a checkpoint; ``checkpoint_every_layer`` adds the output of every layer block
    (the input of the block after it).
    """
    starts = [0]
    if every_layer:
        starts += [i for i in range(1, len(blocks)) if blocks[i - 1].is_layer]
    return starts


@dataclass(frozen=True)
class StageStash:
    """The stash FIFOs of one pipeline stage."""

    entry_bytes: int
    """Bytes stashed per micro-batch."""
    depth: int
    """Micro-batches held (FIFO depth)."""
    tensors: int
    """Stashed tensors per micro-batch (FIFO buffers)."""

    @property
    def bytes(self) -> int:
        return self.entry_bytes * self.depth


def saved_bytes(block: BlockCapture, act_bytes: int) -> int:
    """Bytes a block saves for its backward pass (float at the activation precision, masks/indices as captured)."""
    return block.saved_elements * act_bytes + block.saved_int_bytes


def shared_saved_bytes(previous: BlockCapture, block: BlockCapture, act_bytes: int) -> int:
    """Bytes of the tensors that ``previous`` passes to ``block`` and that both save for backward (a ReLU output
    that the next convolution saves as its input): held once when both blocks run on one IPU.

    The capture deduplicates saved tensors within a block only, and records per block the saved elements that
    are its inputs and its outputs; the tensors crossing the boundary are at most the smaller of the two."""
    return min(previous.saved_output_elements, block.saved_input_elements) * act_bytes


def own_saved_bytes(blocks: Sequence[BlockCapture], index: int, act_bytes: int) -> int:
    """Bytes block ``index`` adds to what ``blocks[:index]`` (run before it on the same IPU, with their saved
    tensors still live) already hold."""
    b = blocks[index]
    shared = shared_saved_bytes(blocks[index - 1], b, act_bytes) if index > 0 else 0
    return saved_bytes(b, act_bytes) - shared


def stage_stash(blocks: Sequence[BlockCapture], depth: int, recompute: bool, every_layer: bool,
                act_bytes: int) -> StageStash:
    """Stash of a stage whose FIFOs are ``depth`` deep (shared through a bounded cache: read it, never change it)."""
    return keyed_stage_stash(tuple(b.key for b in blocks), depth, recompute, every_layer, act_bytes)


@lru_cache(maxsize=8192)
def keyed_stage_stash(keys: Tuple[BlockKey, ...], depth: int, recompute: bool, every_layer: bool,
                      act_bytes: int) -> StageStash:
    """``stage_stash`` of the blocks of ``keys`` (``BlockCapture.key``)."""
    blocks = [k.block for k in keys]
    if recompute:
        starts = segment_starts(blocks, every_layer)
        entry = sum(tensor_bytes(blocks[i].inputs, act_bytes) for i in starts)
        tensors = sum(len(blocks[i].inputs) for i in starts)
    else:
        # Consecutive blocks of a stage share the tensors they pass on; another stage (another IPU, or another
        # stash on the same IPU) keeps its own copy.
        entry = sum(own_saved_bytes(blocks, i, act_bytes) for i in range(len(blocks)))
        tensors = len(blocks)  # one FIFO per block's saved set is enough for the grain model
    return StageStash(entry_bytes=entry, depth=depth, tensors=tensors)


@dataclass
class Held:
    """Bytes of an unpipelined stage's checkpoints (with recomputation) or saved activations (without) live at
    each of its steps, by block index, beyond what the memory model counts in the step's working set."""

    fwd: List[int]
    """At the forward pass of each block."""
    recompute: List[int]
    """At the recomputation of each block (zeros without recomputation)."""
    bwd: List[int]
    """At the backward pass of each block."""


def unpipelined_held(blocks: Sequence[BlockCapture], recompute: bool, every_layer: bool, act_bytes: int) -> Held:
    """What a stage without a pipeline holds between its passes (module docstring).

    With recomputation, checkpoint ``j`` (the input of the block starting segment ``j``) is live from its forward
    until the backward of segment ``j``: segments run backward last to first, so the backward of segment ``j``
    holds checkpoints ``0..j``, later ones already freed. A block's forward peak counts its float inputs, so a
    checkpoint is left out at the (re)computation of the block it enters; the part of it that this block saves
    for backward is counted by the memory model with the recomputed segment. Without recomputation, block ``i``'s
    saved tensors (less those shared with the block before it) are live from its forward to its backward.
    """
    n = len(blocks)
    if not recompute:
        cumulative = list(accumulate(own_saved_bytes(blocks, i, act_bytes) for i in range(n)))
        return Held(fwd=cumulative, recompute=[0] * n, bwd=list(cumulative))
    starts = segment_starts(blocks, every_layer)
    fwd, rec, bwd = [0] * n, [0] * n, [0] * n
    before = 0  # checkpoints of the segments before this one
    for lo, hi in zip(starts, starts[1:] + [n]):
        first = blocks[lo]
        checkpoint = tensor_bytes(first.inputs, act_bytes)
        in_peak = float_elements(first.inputs) * act_bytes
        kept = min(first.saved_input_elements * act_bytes, in_peak)
        for i in range(lo, hi):
            fwd[i] = before + (checkpoint - in_peak if i == lo else checkpoint)
            rec[i] = before + (checkpoint - in_peak if i == lo else checkpoint - kept)
            bwd[i] = before + checkpoint - kept
        before += checkpoint
    return Held(fwd=fwd, recompute=rec, bwd=bwd)
