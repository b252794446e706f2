"""The casts PopTorch makes where a model's weights and its activations differ in precision: an op reading a weight
of one float type and activations of another reads the weight cast to the activations' type (fp16 activations of
an fp32 model compute in fp16, as PopTorch's ``test_float16_activations_float32_weights`` expects), so the fp32
weights stay the master copy that the update changes."""
from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Iterable, List, Set, Tuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map


class WeightCast(TorchFunctionMode):
    """Casts the weights an op reads to its activations' float type, when all its activations share one."""

    def __init__(self, weights: Iterable[torch.Tensor]) -> None:
        super().__init__()
        self.weights: Set[int] = {id(w) for w in weights if w.is_floating_point()}

    def __torch_function__(self, func: Any, types_: Any, args: Tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        flat = tree_flatten((args, kwargs))[0]
        tensors = [t for t in flat if isinstance(t, torch.Tensor) and t.is_floating_point()]
        acts = {t.dtype for t in tensors if id(t) not in self.weights}
        if len(acts) == 1 and any(id(t) in self.weights and t.dtype not in acts for t in tensors):
            dtype = next(iter(acts))
            args, kwargs = tree_map(lambda t: t.to(dtype) if isinstance(t, torch.Tensor) and id(t) in self.weights
                                    and t.dtype != dtype else t, (args, kwargs))
        return func(*args, **kwargs)


def needs_cast(weights: Iterable[torch.Tensor], inputs: Iterable[Any]) -> bool:
    """Whether weights of more than one float type, or inputs of another type than the weights', meet (else the
    model runs as it is, at no cost)."""
    dtypes = {t.dtype for t in weights if t.is_floating_point()}
    given = {t.dtype for t in inputs if isinstance(t, torch.Tensor)}
    return len(dtypes) > 1 or bool(dtypes and given - dtypes)


def weights_of(model: torch.nn.Module, training: bool) -> List[torch.Tensor]:
    """The tensors cast: the parameters, and the buffers of a model that does not train (a training model updates
    its running statistics in place, which a cast copy would lose)."""
    return [*model.parameters(), *([] if training else model.buffers())]


def casting(weights: List[torch.Tensor], inputs: List[Any]) -> ContextManager[Any]:
    """A ``WeightCast`` over these weights where the inputs or weights mix types, else nothing."""
    return WeightCast(weights) if needs_cast(weights, inputs) else contextlib.nullcontext()
