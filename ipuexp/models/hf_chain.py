"""A Transformers stack's layer loop, taken apart: what its loop hands the first layer, what one layer hands the
next, and the layer blocks that replay those calls.

A probe stands in for the layer list and stops the stack's own ``forward`` at the first layer's call, so the
embeddings block computes exactly what the stack computes before its loop. Letting the first layer run and
stopping at the second call shows what the loop carries from one layer to the next: T5's relative position bias,
computed by its first layer and handed on to the others, is such a value; it then travels between the layer
blocks as a real tensor, as it does between PopTorch's pipeline stages.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_unflatten

from ipuexp.models.hf_attention import HostConstants


class _Stop(Exception):
    """Raised by the probe standing in for a layer: carries the layer's call."""


class _Probe(nn.Module):
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise _Stop(args, kwargs)


class Context:
    """What a loop passes each layer besides the hidden states, as a flat list of tensors plus the structure and
    constants to rebuild the call; ``carry`` maps a leaf of that call to the index of the layer output that the
    loop feeds into it from the second layer on."""

    def __init__(self) -> None:
        self.spec: Any = None
        self.leaves: List[Any] = []
        self.tensor_at: List[int] = []
        self.carry: Dict[int, int] = {}

    def flatten(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[torch.Tensor, ...]:
        leaves, spec = tree_flatten((args, kwargs))
        if self.spec is None:
            self.spec, self.leaves = spec, leaves
            self.tensor_at = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
        return tuple(leaves[i] for i in self.tensor_at)

    def rebuild(self, tensors: Tuple[Any, ...], carried: Tuple[Any, ...] = ()) -> Tuple[Tuple[Any, ...], Dict]:
        leaves = list(self.leaves)
        for i, t in zip(self.tensor_at, tensors, strict=True):
            leaves[i] = t
        for i, t in zip(self.carry, carried):
            leaves[i] = t
        return tree_unflatten(leaves, self.spec)

    @property
    def width(self) -> int:
        """Tensors a layer block passes on besides the hidden states: the context, then the carried values."""
        return len(self.tensor_at) + len(self.carry)


@contextmanager
def one_sequence_per_sample() -> Iterator[None]:
    """Transformers' packed-sequence detection off: it reads the position ids' values, which meta tensors do not
    have, and ipuexp's inputs hold one sequence per sample."""
    import transformers.masking_utils as masking

    find_packed = masking.find_packed_sequence_indices
    masking.find_packed_sequence_indices = lambda *a, **k: None
    try:
        with HostConstants():
            yield
    finally:
        masking.find_packed_sequence_indices = find_packed


def probe(stack: nn.Module, layers: Tuple[nn.Module, str], inputs: Dict[str, Any], stop_at: int = 0
          ) -> Tuple[Any, Tuple[Any, ...], Dict[str, Any]]:
    """Run ``stack`` with its layer list cut before layer ``stop_at``; return (hidden states, args, kwargs) of that
    layer's call."""
    parent, name = layers
    saved = getattr(parent, name)
    parent._modules[name] = nn.ModuleList([*list(saved)[:stop_at], _Probe()])
    try:
        with one_sequence_per_sample():
            stack(**inputs)
    except _Stop as stop:
        args, kwargs = stop.args
    else:
        raise ValueError(f"model.hf.config: {type(stack).__name__} returned without calling its layers "
                         f"({name}); allowed: a backbone that loops over its layer list")
    finally:
        parent._modules[name] = saved
    args, kwargs = list(args), dict(kwargs)
    hidden = args.pop(0) if args else kwargs.pop("hidden_states")
    return hidden, tuple(args), kwargs


def carried(stack: nn.Module, layers: Tuple[nn.Module, str], inputs: Dict[str, Any], context: Context) -> None:
    """Fill ``context.carry``: the leaves of the second layer's call that are outputs of the first layer."""
    layer_list = getattr(*layers)
    if len(layer_list) < 2:
        return
    outputs: List[Any] = []
    hook = layer_list[0].register_forward_hook(lambda _m, _a, out: outputs.append(out))
    try:
        _, args, kwargs = probe(stack, layers, inputs, stop_at=1)
    finally:
        hook.remove()
    out = outputs[0] if outputs else ()
    out = out if isinstance(out, tuple) else (out,)
    leaves, spec = tree_flatten((args, kwargs))
    if spec != context.spec:
        return
    for i, leaf in enumerate(leaves):
        j = next((k for k, o in enumerate(out) if k and isinstance(o, torch.Tensor) and o is leaf), None)
        if j is not None:
            context.carry[i] = j


class Layer(nn.Module):
    """One layer of a stack, called as its loop calls it. Takes and returns (hidden, context tensors, carried
    values, what follows); the first layer of a stack takes no carried values and hands them on."""

    def __init__(self, layer: nn.Module, context: Context, first: bool = False) -> None:
        super().__init__()
        self.layer = layer
        self.first = bool(first)
        self.__dict__["_context"] = context

    def forward(self, hidden: torch.Tensor, *rest: Any) -> Tuple[Any, ...]:
        ctx = self._context
        n, k = len(ctx.tensor_at), (0 if self.first else len(ctx.carry))
        args, kwargs = ctx.rebuild(rest[:n], rest[n:n + k])
        with HostConstants():
            out = self.layer(hidden, *args, **kwargs)
        if not isinstance(out, tuple):
            return (out, *rest)
        handed = tuple(out[j] for j in ctx.carry.values())
        return (out[0], *rest[:n], *handed, *rest[n + k:])


def layer_list(stack: nn.Module, what: str) -> Tuple[nn.Module, str, nn.ModuleList]:
    """The longest ModuleList of modules of one class: the repeated layers."""
    best: Optional[Tuple[str, nn.Module]] = None
    for path, module in stack.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) and len({type(m) for m in module}) == 1:
            if best is None or len(module) > len(best[1]):
                best = (path, module)
    if best is None:
        children = ", ".join(f"{n} ({type(m).__name__})" for n, m in stack.named_children())
        raise ValueError(f"model.hf.config: {what} cannot be split: {type(stack).__name__} holds no list of "
                         f"repeated layers (found {children}); allowed: a model whose layers are a ModuleList")
    path, module = best
    parent_path, _, name = path.rpartition(".")
    return stack.get_submodule(parent_path) if parent_path else stack, name, module


def ran_before(stack: nn.Module, layers: Tuple[nn.Module, str], inputs: Dict[str, Any], what: str
               ) -> Tuple[Any, Tuple[Any, ...], Dict[str, Any], set]:
    """Probe ``stack`` at its first layer, noting which of its modules ran on the way (its embeddings)."""
    ran: set = set()
    hooks = [m.register_forward_pre_hook(lambda mod, _a: ran.add(id(mod))) for m in stack.modules()]
    try:
        hidden, args, kwargs = probe(stack, layers, inputs)
    except ValueError:
        raise
    except Exception as exc:  # the model's own code failed on meta tensors: one line, the cause chained
        raise ValueError(f"model.hf.config: {what} cannot be split: running its backbone up to the first layer "
                         f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:200]}; allowed: a backbone "
                         "that runs on meta tensors") from exc
    finally:
        for h in hooks:
            h.remove()
    return hidden, args, kwargs, ran


def run_layer(layer: nn.Module, hidden: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """A layer's output outside the chain (no gradients), as its loop calls it: to follow the hidden states from
    one stack or stage to the next while the model is split, and to see how many values a layer returns."""
    with torch.no_grad(), one_sequence_per_sample():
        return layer(hidden, *args, **kwargs)


def layer_arity(layer: nn.Module, hidden: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> int:
    """How many values a layer returns (0: a bare tensor), for the stand-ins of a replay."""
    out = run_layer(layer, hidden, args, kwargs)
    return len(out) if isinstance(out, tuple) else 0
