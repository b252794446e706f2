"""Pipeline-block annotations: a model is a chain of named blocks, as with ``poptorch.BeginBlock``.

Each block takes a tuple of tensors and returns a tuple; the first block receives the model's example inputs
(inputs followed by labels) and the last returns ``(loss, logits)``. Labels travel along the chain so that the
block holding the loss can use them, which is what PopTorch's pipelined models do with their label inputs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn


@dataclass(frozen=True)
class InputSpec:
    """One model input (or label) per sample."""

    name: str
    """Input name, e.g. ``input_ids``."""
    shape: Tuple[int, ...]
    """Shape of one sample (the micro-batch dimension is prepended)."""
    dtype: str = "float32"
    """torch dtype name: float32 for images, int32 for ids and labels (the IPU has no 64-bit integers;
    the TF2 IPU guide and the TF distributed-training guide cast labels to int32 before feeding the IPU)."""
    is_label: bool = False
    """True for labels (they follow the inputs)."""
    high: Optional[int] = None
    """Exclusive upper bound of random integer values (vocabulary size, classes) for real example data."""

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def bytes(self) -> int:
        return self.elements * getattr(torch, self.dtype).itemsize


class Block(nn.Module):
    """A named pipeline block wrapping ``module`` (``poptorch.BeginBlock`` style).

    ``is_layer`` marks the repeated layers that ``layers_per_ipu`` distributes over the IPUs; blocks before the
    first layer join the first stage, blocks after the last layer the last (or a stage of their own).
    """

    def __init__(self, name: str, module: nn.Module, is_layer: bool = False) -> None:
        super().__init__()
        if not name:
            raise ValueError("Block name: '' is not allowed; allowed: a non-empty string")
        self.name = name
        self.module = module
        self.is_layer = bool(is_layer)

    def forward(self, *inputs: Any) -> Tuple[Any, ...]:
        out = self.module(*inputs)
        return out if isinstance(out, tuple) else (out,)

    def extra_repr(self) -> str:
        return f"name={self.name!r}, is_layer={self.is_layer}"


class PipelinedModel(nn.Module):
    """A model as a chain of :class:`Block`; ``forward(*inputs)`` runs the blocks in order.

    Build one from your own modules::

        model = PipelinedModel([Block("B1", stem), Block("L0", layer, is_layer=True), Block("head", head)],
                               name="mine", input_spec=[InputSpec("x", (3, 32, 32)),
                                                        InputSpec("y", (), "int32", is_label=True, high=10)])

    Subclasses may override :meth:`example_inputs` instead of giving ``input_spec``.
    """

    def __init__(
        self,
        blocks: Sequence[Block],
        name: str = "custom",
        input_spec: Optional[Sequence[InputSpec]] = None,
        hparams: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__()
        blocks = list(blocks)
        if not blocks:
            raise ValueError("PipelinedModel blocks: [] is not allowed; allowed: one or more ipuexp.Block")
        for b in blocks:
            if not isinstance(b, Block):
                raise TypeError(f"PipelinedModel blocks: {type(b).__name__} is not an ipuexp.Block")
        names = [b.name for b in blocks]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"PipelinedModel blocks: duplicate block names {duplicates}; names must be unique")
        self.blocks = nn.ModuleList(blocks)
        self.name = name
        self.input_spec: List[InputSpec] = list(input_spec or [])
        self.hparams: Dict[str, Any] = dict(hparams or {})
        """Hyper-parameters recorded with a capture."""

    def forward(self, *inputs: Any) -> Tuple[Any, ...]:
        x: Tuple[Any, ...] = tuple(inputs)
        for block in self.blocks:
            x = block(*x)
        return x

    @property
    def num_layers(self) -> int:
        return sum(1 for b in self.blocks if b.is_layer)

    def example_inputs(self, micro_batch_size: int, device: Any = "meta") -> Tuple[torch.Tensor, ...]:
        """Inputs followed by labels for one micro-batch; random values unless ``device`` is meta."""
        if not self.input_spec:
            raise ValueError(f"{type(self).__name__} has no input_spec: pass input_spec=[InputSpec(...)] "
                             "or override example_inputs")
        return tuple(make_input(s, micro_batch_size, device) for s in self.input_spec)

    def labels_index(self) -> int:
        """Position of the first label in :meth:`example_inputs` (the number of non-label inputs)."""
        return sum(1 for s in self.input_spec if not s.is_label)


def make_input(spec: InputSpec, micro_batch_size: int, device: Any = "meta",
               generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """A tensor for ``spec`` with the micro-batch dimension first."""
    shape = (micro_batch_size, *spec.shape)
    dtype = getattr(torch, spec.dtype)
    if torch.device(device).type == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype, device=device, generator=generator)
    return torch.randint(0, spec.high or 2, shape, dtype=dtype, device=device, generator=generator)

