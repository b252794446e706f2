"""Plain data describing a captured model: what each pipeline block computes and keeps.

A capture is made once per (model, micro-batch shape) on meta tensors and cached as JSON. Quantities are in
elements (not bytes) wherever the dtype depends on ``options.precision``, so one capture serves every precision;
the engine converts to bytes.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

CAPTURE_FORMAT = 3
"""Bump when the meaning or layout of captured fields changes (invalidates cached captures). 2: saved inputs and
outputs of each block; 3: every ``pow`` recorded as POWER."""


@dataclass
class OpRecord:
    """One aten operation of a block, merged over identical (op, shape) occurrences."""

    op: str
    """aten op name, e.g. ``aten.mm``."""
    kind: str
    """matmul, conv, elementwise, norm, softmax, reduction, embedding, ctc, power (PopLibs' element-at-a-time
    POWER), data (views/copies) or other."""
    phase: str
    """fwd or bwd."""
    count: int
    """Occurrences merged into this record."""
    flops: int
    """FLOPs of all occurrences (PyTorch's flop counter; 0 for ops it does not count)."""
    elements_read: int
    """Input elements read by all occurrences."""
    elements_written: int
    """Output elements written by all occurrences."""
    matmul_shape: Optional[List[int]] = None
    """[M, K, N] (batch folded into M) for matmul/conv records, for plan efficiency; [frames, batch, labels] for the
    CTC loss."""


@dataclass
class TensorInfo:
    """A tensor crossing a block boundary."""

    shape: List[int]
    dtype: str
    """Capture dtype (float32 stands for the activation dtype; int64/int32/bool are kept as they are)."""
    elements: int


@dataclass
class BlockCapture:
    """Everything the engine needs from one pipeline block for one micro-batch."""

    name: str
    """Block name (``ipuexp.Block`` name)."""
    is_layer: bool
    """True for the repeated layers that ``layers_per_ipu`` distributes (encoder layers, stages of a CNN)."""
    parameters: int
    """Parameters owned by this block (tied weights counted once, in the first block that uses them)."""
    parameter_tensors: int
    """Number of parameter tensors owned (for code and exchange models)."""
    largest_parameter: int
    """Elements of the largest parameter tensor (embedding tables dominate tile imbalance)."""
    fwd_flops: int
    bwd_flops: int
    saved_elements: int
    """Float elements saved for backward during forward (saved-tensor hooks), deduplicated by storage."""
    saved_int_bytes: int
    """Bytes of non-float tensors saved for backward (masks, indices)."""
    peak_fwd_elements: int
    """Peak float elements live inside the block during its forward (temporaries included)."""
    inputs: List[TensorInfo]
    """Tensors entering the block (its recomputation checkpoint)."""
    outputs: List[TensorInfo]
    """Tensors leaving the block."""
    ops: List[OpRecord] = field(default_factory=list)
    """Operations, forward and backward."""
    op_count_fwd: int = 0
    """aten ops dispatched in forward (before merging), for compute-set and code models."""
    op_count_bwd: int = 0
    """aten ops dispatched in backward (before merging)."""
    tied_parameters: int = 0
    """Parameters used here but owned by an earlier block (tied embeddings)."""
    saved_input_elements: int = 0
    """Float elements of ``saved_elements`` that are the block's own inputs (e.g. the input of its first matmul)."""
    saved_output_elements: int = 0
    """Float elements of ``saved_elements`` that are the block's own outputs (e.g. a final ReLU's output). A tensor
    passed from one block to the next and saved by both is in the first's saved outputs and the second's saved
    inputs: on one IPU it is stored once."""

    @functools.cached_property
    def signature(self) -> Tuple[Any, ...]:
        """Identity of a repeated block: every field but the name, so blocks with equal signatures cost the same
        cycles and memory (the emulator computes such layers once). Decided here, once, for every consumer; the
        operation records enter as one hash so that the key stays cheap to look up."""
        ops = hash(tuple((r.op, r.kind, r.phase, r.count, r.flops, r.elements_read, r.elements_written,
                          tuple(r.matmul_shape) if r.matmul_shape else None) for r in self.ops))
        tensors = tuple(tuple((tuple(t.shape), t.dtype, t.elements) for t in ts)
                        for ts in (self.inputs, self.outputs))
        return (self.is_layer, self.parameters, self.parameter_tensors, self.fwd_flops, self.bwd_flops,
                self.saved_elements, self.saved_int_bytes, self.peak_fwd_elements, self.op_count_fwd,
                self.op_count_bwd, self.tied_parameters, self.largest_parameter, self.saved_input_elements,
                self.saved_output_elements, tensors, ops)

    @functools.cached_property
    def key(self) -> "BlockKey":
        """The block as a key of the engine's bounded caches (``functools.lru_cache``), by its signature: one object
        for the blocks of equal signature seen so far, so that looking up repeated layers compares no signatures."""
        return _canonical(BlockKey(self))


class BlockKey:
    """A block hashed and compared by its signature: blocks are mutable dataclasses, so caches key on this and
    blocks of equal signature (repeated layers, other graphs' copies) share their entries."""

    __slots__ = ("block", "signature", "_hash")

    def __init__(self, block: BlockCapture):
        self.block = block
        self.signature = block.signature
        self._hash = hash(self.signature)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, BlockKey) and self.signature == other.signature)


@dataclass
class Graph:
    """A captured model for one micro-batch size."""

    model: str
    """Model identifier (family and variant)."""
    micro_batch_size: int
    blocks: List[BlockCapture]
    input_bytes_per_sample: int
    """Host-to-device bytes per sample at capture dtype (token ids, images as float32)."""
    input_elements_per_sample: int
    """Elements of input per sample (for int8/fp16 IO)."""
    num_layers: int
    """Blocks with is_layer=True."""
    capture_seconds: float = 0.0
    meta: Dict[str, str] = field(default_factory=dict)
    """Model hyper-parameters, torch version."""

    @property
    def parameters(self) -> int:
        return sum(b.parameters for b in self.blocks)

    @property
    def fwd_flops(self) -> int:
        return sum(b.fwd_flops for b in self.blocks)

    @property
    def bwd_flops(self) -> int:
        return sum(b.bwd_flops for b in self.blocks)


@dataclass
class Stage:
    """A pipeline stage: consecutive blocks placed on one IPU."""

    index: int
    ipu: int
    blocks: List[BlockCapture]

    @property
    def parameters(self) -> int:
        return sum(b.parameters for b in self.blocks)

    @property
    def fwd_flops(self) -> int:
        return sum(b.fwd_flops for b in self.blocks)

    @property
    def bwd_flops(self) -> int:
        return sum(b.bwd_flops for b in self.blocks)

    @property
    def inputs(self) -> List[TensorInfo]:
        return self.blocks[0].inputs

    @functools.cached_property
    def key(self) -> Tuple["BlockKey", ...]:
        """Its blocks' cache keys (``BlockCapture.key``), in order (a stage's blocks are fixed once assigned)."""
        return tuple(b.key for b in self.blocks)

    @property
    def outputs(self) -> List[TensorInfo]:
        return self.blocks[-1].outputs


@functools.lru_cache(maxsize=65536)
def _canonical(key: BlockKey) -> BlockKey:
    return key
