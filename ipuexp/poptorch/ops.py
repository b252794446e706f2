"""PopTorch's ops that a model's code calls: ``identity_loss``, ``recomputationCheckpoint``, ``ipu_print_tensor``,
``nop``, ``set_available_memory``. On the CPU they compute what PopTorch computes; a capture hears of the
recomputation checkpoints and losses through ``marks``."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, List

import torch

from torch.utils.weak import WeakIdKeyDictionary

marks = {"losses": WeakIdKeyDictionary(), "checkpoints": 0, "on_ipu": 0}
"""Tensors ``identity_loss`` returned (the training loss), how many ``recomputationCheckpoint`` calls ran, and how
many executor calls of a model are running (the model runs "on the IPU")."""


def isRunningOnIpu() -> bool:
    """True while a ``PoplarExecutor`` runs the model (its capture and its numerics, which stand for the IPU's),
    False when the model is called on the CPU."""
    return marks["on_ipu"] > 0


@contextlib.contextmanager
def on_ipu() -> Iterator[None]:
    """The model runs as on the IPU in the ``with`` block."""
    marks["on_ipu"] += 1
    try:
        yield
    finally:
        marks["on_ipu"] -= 1


def _overlap(tensors: Any, mode: Any, output: bool) -> Any:
    from torch.utils._pytree import tree_map

    from ipuexp.poptorch.errors import Error
    from ipuexp.poptorch.overlap_checks import active

    for t in _flatten(tensors):
        if not isinstance(t, torch.Tensor):
            raise Error(f"You may only set overlap for torch.tensor inputs. {type(t)} is not supported.")
    check = active()
    return tensors if check is None else tree_map(lambda t: check.mark(t, mode, output), tensors)


def set_overlap_for_input(input_tensors: Any, mode: Any) -> Any:
    """The host IO of these inputs overlaps compute (``mode``: an ``OverlapMode``): the values are unchanged; the
    prediction's overlap follows ``options.io.num_io_tiles`` (``TensorLocations.numIOTiles``)."""
    return _overlap(input_tensors, mode, False)


def set_overlap_for_output(output_tensors: Any, mode: Any) -> Any:
    """The host IO of these outputs overlaps compute: the values are unchanged, as for the inputs."""
    return _overlap(output_tensors, mode, True)


def identity_loss(x: torch.Tensor, reduction: str) -> torch.Tensor:
    """``x`` reduced by ``reduction`` ("sum", "mean" or "none") and marked as the loss to minimise."""
    if reduction == "sum":
        out = x.sum()
    elif reduction == "mean":
        out = x.mean()
    elif reduction == "none":
        out = x * 1
    else:
        raise ValueError(f"reduction must be sum, mean or none, not {reduction!r}")
    marks["losses"][out] = True
    return out


def recomputationCheckpoint(*tensors: Any) -> Any:
    """Recompute from these tensors in the backward pass: the values are unchanged."""
    marks["checkpoints"] += 1
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return type(tensors[0])(tensors[0])
    return tensors[0] if len(tensors) == 1 else tensors


def ipu_print_tensor(tensor: torch.Tensor, title: str = "", print_gradient: bool = True,
                     summarise_threshold: int = 1000, edge_items: int = 3, max_line_width: int = 75,
                     digits: int = 4, float_format: str = "auto", separator: str = ", ",
                     open_bracket: str = "(", close_bracket: str = ")") -> torch.Tensor:
    """Print ``tensor`` when the model runs (not while it is captured on meta tensors); returns it."""
    if tensor.device.type != "meta":
        with torch.no_grad():
            text = torch._tensor_str._tensor_str(tensor.detach(), 0) if tensor.dim() else str(tensor.item())
        print(f"{title}{': ' if title else ''}{text}")
    return tensor


def nop(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def set_available_memory(tensor: torch.Tensor, available_memory_proportion: float) -> torch.Tensor:
    return tensor


def loss_of(outputs: Any) -> torch.Tensor:
    """The loss among a training model's outputs: what ``identity_loss`` returned, else the output itself when it is
    a scalar (a tensor of any other shape has no gradient to start from), else the scalar outputs that need a
    gradient (summed when there are several, as PopTorch sums several losses)."""
    flat: List[torch.Tensor] = [t for t in _flatten(outputs) if isinstance(t, torch.Tensor)]
    marked = [t for t in flat if t in marks["losses"]]
    if len(marked) > 1:  # a loss another marked loss is computed from is a partial one: the final losses remain
        marked = [t for t in marked if not any(_feeds(t, other) for other in marked if other is not t)] or marked
    if marked:
        return marked[0] if len(marked) == 1 else sum(marked[1:], marked[0])
    if isinstance(outputs, torch.Tensor) and outputs.dim() == 0:
        return outputs
    scalars = [t for t in flat if t.dim() == 0 and t.is_floating_point() and t.requires_grad]
    if not scalars:
        from ipuexp.poptorch.errors import UnsupportedError

        raise UnsupportedError("a training model without a scalar loss among its outputs",
                               "a model returning its loss (a scalar, or poptorch.identity_loss(...)), "
                               "alone or in a tuple")
    return scalars[0] if len(scalars) == 1 else sum(scalars[1:], scalars[0])


def _feeds(t: torch.Tensor, other: torch.Tensor) -> bool:
    """Whether ``other`` was computed from ``t`` (``t``'s autograd node is among ``other``'s ancestors)."""
    if t.grad_fn is None or other.grad_fn is None:
        return False
    seen, todo = set(), [other.grad_fn]
    while todo:
        node = todo.pop()
        if node is t.grad_fn:
            return True
        if node is None or node in seen:
            continue
        seen.add(node)
        todo.extend(n for n, _ in node.next_functions)
    return False


def _flatten(x: Any) -> List[Any]:
    if isinstance(x, (list, tuple)):
        return [y for item in x for y in _flatten(item)]
    if isinstance(x, dict):
        return [y for item in x.values() for y in _flatten(item)]
    return [x]
