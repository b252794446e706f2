"""A model's plain tensor attributes (neither parameters nor buffers) are constants of the compiled graph, as
PopTorch compiles them: every call reads the value they had when the model was compiled, and what the model writes
to them stays on the IPU (the host keeps its own value; a buffer is what a model keeps state in)."""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Tuple

import torch


def tensor_constants(model: torch.nn.Module) -> List[Tuple[torch.nn.Module, str, torch.Tensor]]:
    """(module, attribute, tensor) of each plain tensor attribute of ``model``'s modules."""
    return [(m, name, v) for m in model.modules() for name, v in vars(m).items()
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter)]


def snapshot(model: torch.nn.Module) -> Dict[Tuple[int, str], torch.Tensor]:
    """The constants' values at compile time."""
    return {(id(m), name): v.detach().clone() for m, name, v in tensor_constants(model)}


@contextlib.contextmanager
def as_compiled(model: torch.nn.Module, values: Dict[Tuple[int, str], torch.Tensor]) -> Iterator[None]:
    """The model's constants hold their compile-time values in the ``with`` block; the host's values after it."""
    host: List[Tuple[Any, str, torch.Tensor]] = []
    for m, name, v in tensor_constants(model):
        value = values.get((id(m), name))
        if value is not None:
            host.append((m, name, v))
            setattr(m, name, value.clone())
    try:
        yield
    finally:
        for m, name, v in host:
            setattr(m, name, v)
