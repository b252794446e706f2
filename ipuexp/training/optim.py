"""Optimizers named by ``optimizer.name``: torch's own where torch has them, LAMB and LARS written out.

The first moment (``optimizer.momentum``) is beta1 for Adam-style optimizers and the momentum for SGD/LARS;
beta2 = 0.999 and eps = 1e-6 for LAMB, torch's defaults elsewhere. ``optimizer.state_precision: half`` keeps
the state at fp16 precision (``enable_half_first_order_momentum`` in Graphcore's configs): it is rounded to
fp16 after every step.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, List

if TYPE_CHECKING:
    from ipuexp.config.schema import OptimizerConfig

OPTIMIZERS = ("sgd", "sgd_momentum", "adam", "adamw", "lamb", "lars")


def _torch_optimizer_base() -> Any:
    import torch

    return torch.optim.Optimizer


def build_optimizer(cfg: OptimizerConfig, params: Iterable[Any]) -> Any:
    """A ``torch.optim.Optimizer`` over ``params`` for an ``OptimizerConfig``."""
    import torch

    name = getattr(cfg.name, "value", cfg.name)
    lr, mom, wd = float(cfg.learning_rate), float(cfg.momentum), float(cfg.weight_decay)
    params = list(params)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.0, weight_decay=wd)
    if name == "sgd_momentum":
        return torch.optim.SGD(params, lr=lr, momentum=mom, weight_decay=wd)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, betas=(mom, 0.999), weight_decay=wd)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=(mom, 0.999), weight_decay=wd)
    if name == "lamb":
        return lamb_class()(params, lr=lr, betas=(mom, 0.999), weight_decay=wd)
    if name == "lars":
        return _lars_class()(params, lr=lr, momentum=mom, weight_decay=wd)
    raise AssertionError(f"optimizer.name {name!r} passed validation but has no optimizer here")


def round_state_to_half(optimizer: Any) -> None:
    """Keep every floating-point state tensor at fp16 precision (stored in place, dtype unchanged)."""
    import torch

    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dim() > 0:
                value.copy_(value.half())


def lamb_class() -> Any:
    """The LAMB optimizer class (torch imported when it is asked for; ``ipuexp.poptorch.optim`` builds on it)."""
    import torch

    class Lamb(_torch_optimizer_base()):
        """LAMB (You et al. 2020, "Large Batch Optimization for Deep Learning", algorithm 2): Adam's direction
        (bias-corrected unless ``bias_correction=False``, PopART's LAMB_NO_BIAS) plus decoupled weight decay, scaled
        per tensor by the trust ratio ||w|| / ||direction||, with ||w|| clipped to ``max_weight_norm`` when given
        (1 where either norm is zero)."""

        def __init__(self, params: Any, lr: float = 1e-3, betas: Any = (0.9, 0.999), eps: float = 1e-6,
                     weight_decay: float = 0.0, bias_correction: bool = True,
                     max_weight_norm: Any = None) -> None:
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
            self.bias_correction = bool(bias_correction)
            self.max_weight_norm = None if max_weight_norm is None else float(max_weight_norm)

        @torch.no_grad()
        def step(self, closure: Any = None) -> Any:
            loss = closure() if closure is not None else None
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
                    if self.max_weight_norm is not None:
                        w_norm = w_norm.clamp(max=self.max_weight_norm)
                    trust = torch.where((w_norm > 0) & (d_norm > 0), w_norm / d_norm, torch.ones_like(w_norm))
                    p.add_(direction * trust, alpha=-group["lr"])
            return loss

    return Lamb


def _lars_class() -> Any:
    import torch

    class Lars(_torch_optimizer_base()):
        """LARS (You, Gitman and Ginsburg 2017, "Large Batch Training of Convolutional Networks", algorithm 1):
        SGD with momentum whose per-tensor learning rate is scaled by eta ||w|| / (||g|| + wd ||w||), with the
        paper's trust coefficient eta = 0.001."""

        def __init__(self, params: Any, lr: float = 1e-3, momentum: float = 0.9, weight_decay: float = 0.0,
                     eta: float = 0.001) -> None:
            super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, eta=eta))

        @torch.no_grad()
        def step(self, closure: Any = None) -> Any:
            loss = closure() if closure is not None else None
            for group in self.param_groups:
                wd, eta = group["weight_decay"], group["eta"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    w_norm, g_norm = p.norm(), p.grad.norm()
                    denom = g_norm + wd * w_norm
                    trust = torch.where((w_norm > 0) & (denom > 0), eta * w_norm / denom, torch.ones_like(w_norm))
                    update = (p.grad + wd * p) * (trust * group["lr"])
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = torch.zeros_like(p)
                    buf = state["momentum_buffer"]
                    buf.mul_(group["momentum"]).add_(update)
                    p.sub_(buf)
            return loss

    return Lars


def parameters_of(optimizer: Any) -> List[Any]:
    return [p for group in optimizer.param_groups for p in group["params"]]
