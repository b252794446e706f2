"""RMSprop's TensorFlow variant, PopTorch's ``RMSprop(use_tf_variant=True)``: as TensorFlow's RMSPropOptimizer
(TF1 ``training/rmsprop.py``) and as PopTorch's docstring lists the differences from torch's: the mean-square
accumulator starts at ones, eps is added inside the square root, and the learning rate goes into the momentum
buffer (``buf = momentum * buf + lr * g / sqrt(ms + eps)``, ``w -= buf``)."""
from __future__ import annotations

from typing import Any

import torch


@torch.no_grad()
def step(optimizer: Any, closure: Any = None) -> Any:
    """One update of every parameter with a gradient."""
    loss = closure() if closure is not None else None
    for group in optimizer.param_groups:
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        momentum, centered, wd = group.get("momentum", 0.0), group.get("centered", False), group["weight_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            g = p.grad.add(p, alpha=wd) if wd else p.grad
            state = optimizer.state[p]
            if not state:
                state["step"] = torch.tensor(0.0)
                state["square_avg"] = torch.ones_like(p)
                if momentum:
                    state["momentum_buffer"] = torch.zeros_like(p)
                if centered:
                    state["grad_avg"] = torch.zeros_like(p)
            state["step"] += 1
            square = state["square_avg"].mul_(alpha).addcmul_(g, g, value=1 - alpha)
            if centered:
                mean = state["grad_avg"].mul_(alpha).add_(g, alpha=1 - alpha)
                square = square - mean * mean
            denom = (square + eps).sqrt()
            if momentum:
                buf = state["momentum_buffer"].mul_(momentum).addcdiv_(g, denom, value=lr)
                p.sub_(buf)
            else:
                p.addcdiv_(g, denom, value=-lr)
    return loss
