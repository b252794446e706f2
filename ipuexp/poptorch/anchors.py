"""``Options.anchorTensor`` and ``PoplarExecutor.getAnchoredTensor``: PopTorch returns a PopART tensor of the graph
by its name. The tensors ipuexp's numerics hold under PopART's names are a parameter's (``NAME``, as
``named_parameters`` names it), its gradient as the update applies it (``Gradient___NAME``: reduced over the
micro-batches and replicas, the loss scale divided out) and its value after the update (``UpdatedVar___NAME``),
each from the call's last weight update (output mode Final, one replica's). Any other PopART tensor (an
activation, an op's output) has no name in the numerics, and is named as unsupported when the model compiles."""
from __future__ import annotations

from typing import Dict, List, Optional

import torch

from ipuexp.poptorch.errors import Error, UnsupportedError

GRADIENT = "Gradient___"
UPDATED = "UpdatedVar___"


def tensor_names(model: torch.nn.Module, training: bool) -> List[str]:
    """The names ``getTensorNames`` lists: every parameter's, and in training its gradient's and update's."""
    names = [n for n, _ in model.named_parameters()]
    return names + ([GRADIENT + n for n in names] + [UPDATED + n for n in names] if training else [])


def for_model(anchored: Dict[str, str], model: torch.nn.Module, training: bool) -> Optional["Anchors"]:
    """The anchors of a model compiled with ``anchored`` (short name: PopART name), None without any."""
    if not anchored:
        return None
    known = set(tensor_names(model, training))
    for long_name in anchored.values():
        if long_name not in known:
            raise UnsupportedError(f"Options.anchorTensor of {long_name!r}",
                                   "a parameter's NAME, Gradient___NAME or UpdatedVar___NAME (training)")
    return Anchors(anchored, model)


def get(anchors: Optional["Anchors"], short_name: str) -> torch.Tensor:
    if anchors is None:
        raise Error(f"Anchor {short_name!r} not defined: anchor it with Options.anchorTensor")
    return anchors.get(short_name)


class Anchors:
    """The anchored tensors of an executor, as its last call left them."""

    def __init__(self, anchored: Dict[str, str], model: torch.nn.Module) -> None:
        self.anchored = dict(anchored)
        self.params = dict(model.named_parameters())
        self.memory: Dict[str, torch.Tensor] = {}

    def gradients(self, params: List[torch.Tensor], summed: List[torch.Tensor], divisor: float) -> None:
        """The gradients an update applies: ``summed`` over micro-batches and replicas, divided by ``divisor``."""
        names = {id(p): n for n, p in self.params.items()}
        grads = {names.get(id(p), ""): g for p, g in zip(params, summed)}
        for short, long_name in self.anchored.items():
            if long_name.startswith(GRADIENT) and long_name[len(GRADIENT):] in grads:
                self.memory[short] = grads[long_name[len(GRADIENT):]].detach().float() / divisor

    def after_call(self) -> None:
        """The parameters' values after the call's updates."""
        for short, long_name in self.anchored.items():
            name = long_name[len(UPDATED):] if long_name.startswith(UPDATED) else long_name
            if not long_name.startswith(GRADIENT) and name in self.params:
                self.memory[short] = self.params[name].detach().clone()

    def get(self, short_name: str) -> torch.Tensor:
        if short_name not in self.anchored:
            raise Error(f"Anchor {short_name!r} not defined: anchor it with Options.anchorTensor")
        if short_name not in self.memory:
            raise Error(f"Anchor {short_name!r} holds no value yet: run the model first")
        return self.memory[short_name]
