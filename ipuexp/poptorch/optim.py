"""``poptorch.optim``: SGD, Adam, AdamW, RMSprop and LAMB with PopTorch's signatures. Each is torch's optimizer
(LAMB written out) that also takes PopTorch's extra arguments (``loss_scaling``, ``accum_type``,
``first_order_momentum_accum_type``, ``velocity_scaling``, ``max_grad_norm``, ...), kept in ``poptorch_args``:
``loss_scaling`` scales the loss of each backward pass and divides the gradients again, ``max_grad_norm`` clips the
gradients' global norm before the update."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch

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


class LAMB(Optimizer, torch.optim.Optimizer):
    """LAMB (You et al. 2020, algorithm 2) with PopTorch's arguments: Adam's direction (bias-corrected unless
    ``bias_correction=False``) plus decoupled weight decay, scaled per tensor by the trust ratio
    ||w|| / ||direction||, with ||w|| clipped to ``max_weight_norm`` when given (1 where either norm is zero)."""

    def __init__(self, params: Any, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, bias_correction: bool = True, **kwargs: Any) -> None:
        _, self.poptorch_args = _split(kwargs)
        self.bias_correction = bool(bias_correction)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        self._clip()
        loss = closure() if closure is not None else None
        max_norm = self.poptorch_args.get("max_weight_norm")
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                if self.bias_correction:
                    m_hat, v_hat = m / (1 - b1 ** state["step"]), v / (1 - b2 ** state["step"])
                else:
                    m_hat, v_hat = m, v
                direction = m_hat / (v_hat.sqrt() + group["eps"]) + group["weight_decay"] * p
                w_norm, d_norm = p.norm(), direction.norm()
                if max_norm is not None:
                    w_norm = w_norm.clamp(max=float(max_norm))
                trust = torch.where((w_norm > 0) & (d_norm > 0), w_norm / d_norm, torch.ones_like(w_norm))
                p.add_(direction * trust, alpha=-group["lr"])
        return loss
