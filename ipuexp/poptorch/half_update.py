"""The weight update of a ``.half()`` model as PopTorch runs it on the IPU, and as ipuexp's functional engine runs
``16.16``: the accumulated gradients (still multiplied by the loss scale, which keeps them inside fp16's range)
are unscaled in fp32, the optimizer computes in fp32 with its state in fp32 or, where the optimizer's
``first_order_momentum_accum_type`` / ``second_order_momentum_accum_type`` (``velocity_accum_type`` for SGD) ask for
fp16, rounded to fp16 precision after each step; the new weights are rounded back into fp16, stochastically when
``Precision.enableStochasticRounding``. torch's optimizers on fp16 weights would instead unscale and keep their
state in fp16, where Adam's ``eps`` (1e-8) is 0 and a zero second moment divides zero by zero (NaN)."""
from __future__ import annotations

from typing import Any, List

import torch

from ipuexp.poptorch.optim import device_step
from ipuexp.training.precision import to_half

_HALF_STATE = {"first_order_momentum_accum_type": ("exp_avg", "momentum_buffer"),
               "second_order_momentum_accum_type": ("exp_avg_sq", "square_avg"),
               "velocity_accum_type": ("momentum_buffer",)}
"""PopTorch's state-type arguments and the torch optimizer state each one types."""


def half_state_keys(optimizer: Any) -> List[str]:
    """The optimizer state kept at fp16 precision, by its PopTorch arguments."""
    extras = getattr(optimizer, "poptorch_args", {})
    return [key for arg, keys in _HALF_STATE.items() if extras.get(arg) == torch.float16 for key in keys]


def step_in_fp32(optimizer: Any, params: List[torch.nn.Parameter], grads: List[torch.Tensor], divisor: float,
                 stochastic: bool, generator: torch.Generator) -> None:
    """One update of ``params`` from their summed ``grads`` divided by ``divisor`` (mean reduction x loss scale):
    the fp16 weights computed on in fp32 and rounded back."""
    halves = [p for p in params if p.dtype == torch.float16]
    with torch.no_grad():
        for p, g in zip(params, grads):
            p.data = p.data.float()
            g = g.float()
            p.grad = g.div_(divisor) if divisor != 1.0 else g
    device_step(optimizer)
    keys = half_state_keys(optimizer)
    with torch.no_grad():
        for p in halves:
            for key in keys:
                value = optimizer.state.get(p, {}).get(key)
                if isinstance(value, torch.Tensor) and value.is_floating_point():
                    value.copy_(value.half())
            p.data = to_half(p.data, stochastic, generator)


class HalfUpdate:
    """The fp32 updates of one executor: its stochastic rounding and the rounding's generator (seeded by the
    options' random seed)."""

    def __init__(self, options: Any) -> None:
        self.stochastic = bool(options.Precision.stochastic_rounding)
        self.generator = torch.Generator().manual_seed(int(options.random_seed or 0))

    def step(self, optimizer: Any, params: List[torch.nn.Parameter], grads: List[torch.Tensor],
             divisor: float) -> None:
        step_in_fp32(optimizer, params, grads, divisor, self.stochastic, self.generator)


def loss_scaler(current: Any, optimizer: Any, options: Any, precision: str) -> Any:
    """The functional engine's loss scaler for the next call: the optimizer's ``loss_scaling``, adapted every
    update when the options ask for automatic loss scaling of a half-precision model (PopART's rule); ``current``
    kept while it still applies."""
    from ipuexp.training.precision import LossScaler

    static = float(getattr(optimizer, "loss_scaling", 1.0))
    auto = bool(options.Training.auto_loss_scaling) and precision == "16.16"
    if current is None or current.auto != auto or (not auto and current.scale != static):
        return LossScaler(static, auto=auto)
    return current
