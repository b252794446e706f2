"""Stash FIFOs: what one entry of a pipeline stage's stash holds (how many entries, the FIFO depth, is the
schedule's: ``ipuexp.execution.schedule.stash_depth``).

IPU optimisation guide section 5.3.2 and TF2 IPU guide section 5.1.5: with recomputation only the recomputation
checkpoints are stashed (a pipeline stage's input is always one, PopTorch adds one per
``recomputationCheckpoint``); without it every activation saved for backward is, each tensor once per stage even
when two consecutive blocks both save it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

from ipuexp.graph.types import BlockCapture
from ipuexp.execution.precision import tensor_bytes


def segment_starts(blocks: Sequence[BlockCapture], every_layer: bool) -> List[int]:
    """Indices of the blocks whose inputs are recomputation checkpoints within one stage.

    The stage input is always a checkpoint; ``checkpoint_every_layer`` adds the output of every layer block
    (the input of the block after it).
    """
    starts = [0]
    if every_layer:
        starts += [i for i in range(1, len(blocks)) if blocks[i - 1].is_layer]
    return starts


@dataclass
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
    """Stash of a stage whose FIFOs are ``depth`` deep."""
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
