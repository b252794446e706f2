"""``poptorch.optim``: SGD, Adam, AdamW, RMSprop and LAMB with PopTorch's signatures. Each is torch's optimizer
(LAMB written out) that also takes PopTorch's extra arguments (``loss_scaling``, ``accum_type``,
``first_order_momentum_accum_type``, ``velocity_scaling``, ``max_grad_norm``, ...), kept in ``poptorch_args``:
``loss_scaling`` scales the loss of each backward pass and divides the gradients again, ``max_grad_norm`` clips the
gradients' global norm before the update."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch

from ipuexp.training.optim import lamb_class

_EXTRAS = ("loss_scaling", "velocity_scaling", "use_combined_accum", "accum_type", "velocity_accum_type",
           "first_order_momentum_accum_type", "second_order_momentum_accum_type", "max_grad_norm",
           "use_tf_variant", "bias_correction", "max_weight_norm")


def _split(kwargs: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(torch's arguments, PopTorch's extras) with the None values left out, so torch's defaults apply."""
    torch_args = {k: v for k, v in kwargs.items() if k not in _EXTRAS and v is not None}
    extras = {k: v for k, v in kwargs.items() if k in _EXTRAS and v is not None}
    return torch_args, extras


class Optimizer:
    """What the PopTorch optimizers share: their extra arguments and the gradient clipping they ask for."""

    poptorch_args: Dict[str, Any]

    @property
    def loss_scaling(self) -> float:
        return float(self.poptorch_args.get("loss_scaling", 1.0))

    @loss_scaling.setter
    def loss_scaling(self, value: float) -> None:
        """A new loss scale (PopTorch: set on the optimizer, then ``setOptimizer``)."""
        self.poptorch_args["loss_scaling"] = float(value)

    def __getstate__(self) -> Dict[str, Any]:
        """torch's state (defaults, state, param groups) and the extra arguments, which torch's alone would drop."""
        return {**super().__getstate__(), "poptorch_args": self.poptorch_args}  # type: ignore[misc]

    def _clip(self) -> None:
        norm = self.poptorch_args.get("max_grad_norm")
        if norm is not None and norm != float("inf"):
            params = [p for g in self.param_groups for p in g["params"] if p.grad is not None]
            torch.nn.utils.clip_grad_norm_(params, float(norm))


def _make(base: Any, name: str, doc: str) -> Any:
    def __init__(self: Any, params: Any, lr: Optional[float] = None, **kwargs: Any) -> None:
        torch_args, self.poptorch_args = _split(dict(kwargs, lr=lr))
        if name == "AdamW" and "weight_decay" not in torch_args:
            torch_args["weight_decay"] = 0.01  # PopTorch's (and torch's) AdamW default
        base.__init__(self, params, **torch_args)

    def step(self: Any, closure: Any = None) -> Any:
        self._clip()
        return base.step(self, closure)

    return type(name, (Optimizer, base), {"__init__": __init__, "step": step, "__doc__": doc,
                                          "__module__": __name__})


SGD = _make(torch.optim.SGD, "SGD", "torch.optim.SGD with PopTorch's extra arguments.")
Adam = _make(torch.optim.Adam, "Adam", "torch.optim.Adam with PopTorch's extra arguments.")
AdamW = _make(torch.optim.AdamW, "AdamW", "torch.optim.AdamW with PopTorch's extra arguments (weight decay 0.01).")
RMSprop = _make(torch.optim.RMSprop, "RMSprop", "torch.optim.RMSprop with PopTorch's extra arguments.")


_Lamb = lamb_class()


class LAMB(Optimizer, _Lamb):
    """LAMB (You et al. 2020, algorithm 2) with PopTorch's arguments: the functional engine's LAMB
    (``ipuexp.training.optim``), bias-corrected unless ``bias_correction=False``, ||w|| clipped to
    ``max_weight_norm`` when given."""

    def __init__(self, params: Any, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, bias_correction: bool = True, **kwargs: Any) -> None:
        _, self.poptorch_args = _split(kwargs)
        _Lamb.__init__(self, params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                       bias_correction=bias_correction, max_weight_norm=self.poptorch_args.get("max_weight_norm"))

    def step(self, closure: Any = None) -> Any:
        self._clip()
        return _Lamb.step(self, closure)
