"""Number formats of a functional run: fp16 compute, weight storage, stochastic rounding and loss scaling.

Graphcore's X.Y notation gives the activation/gradient type X and the weight (master) type Y (as in Graphcore
performance results; IPU optimisation guide section 5.2): "16.16" computes and stores weights in fp16, "16.32"
computes in fp16 from fp32 master weights, "32.32" is fp32 throughout. The weight update itself is computed
in fp32 and rounded into the stored format, to nearest or stochastically (``enableStochasticRounding``, IPU
optimisation guide "Enabling stochastic rounding to improve the average numerical accuracy, in particular during
weight update").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

FP16_MAX = 65504.0
"""Largest finite IEEE half-precision value."""

ALS_BIN_EDGE = 0.0625
ALS_UPPER_PROPORTION = 1e-7
"""PopART ``AutomaticLossScalingSettings`` defaults: ``binEdgeLocation = 0.0625`` (the histogram's bin edge as
a share of the format's range) and ``thresholdUpperCountProportion = 1e-7`` ([git] graphcore/popart
willow/include/popart/sessionoptions.hpp). Rule ([git] popart willow/src/popx/op/lossscaleupdatex.cpp): when the
share of gradient elements in the upper bin exceeds the threshold the loss scale is halved, otherwise doubled,
once per weight update (``updatePeriod = 1``)."""


@dataclass(frozen=True)
class PrecisionPolicy:
    """Types of one run."""

    half_compute: bool
    """Activations and gradients in fp16."""
    half_weights: bool
    """Weights stored in fp16 (no fp32 master copy survives an update)."""
    stochastic_rounding: bool
    """Round fp32 values into fp16 stochastically instead of to nearest."""

    @classmethod
    def from_options(cls, precision: str, stochastic_rounding: bool = False) -> "PrecisionPolicy":
        from ipuexp.execution.precision import precision_bytes

        assert str(precision) in ("16.16", "16.32", "32.32"), precision  # validated with the config
        b = precision_bytes(str(precision))
        return cls(half_compute=b.activation == 2, half_weights=b.weight == 2,
                   stochastic_rounding=bool(stochastic_rounding))

    @property
    def compute_dtype(self) -> Any:
        import torch

        return torch.float16 if self.half_compute else torch.float32


FP16_MIN_NORMAL = 2.0 ** -14
"""Smallest normal fp16 value; below it fp16's spacing is a fixed 2**-24 (IEEE 754 binary16)."""
_DROPPED = 13
"""Mantissa bits fp32 has beyond fp16's (23 - 10)."""


def stochastic_round_half(x: Any, generator: Optional[Any] = None) -> Any:
    """fp32 -> fp16 rounding up or down with probability proportional to the distance to each neighbour.

    In fp16's normal range the 13 mantissa bits fp16 drops are a fraction of one fp16 step: adding a uniform
    13-bit integer to the magnitude's bit pattern carries into the kept bits with exactly that probability, so
    the rounding is unbiased, E[round(x)] = x, at a third of the cost of bracketing each value by its two fp16
    neighbours. Below fp16's smallest normal the step is 2**-24 whatever the exponent: those values round on that
    grid with the same 13 random bits. Values between fp16's largest finite value and the point where nearest
    rounding overflows keep the largest finite value; beyond it, inf, as nearest rounding gives.
    """
    import torch

    x = x.float().contiguous()
    noise = torch.randint(0, 1 << _DROPPED, x.shape, generator=generator, dtype=torch.int32, device=x.device)
    lo, hi = torch.aminmax(x) if x.numel() else (x.new_zeros(()), x.new_zeros(()))
    if max(-float(lo), float(hi)) > FP16_MAX:  # one of them may be nan: then neither branch runs
        a = x.abs()
        # 65520, halfway to the next power of two, is where nearest rounding (ties to even) gives inf
        x = torch.where((a > FP16_MAX) & (a < 65520.0), x.clamp(-FP16_MAX, FP16_MAX), x)
    out = x.view(torch.int32).add(noise).bitwise_and_(~((1 << _DROPPED) - 1)).view(torch.float32).half()
    small = torch.nonzero(x.abs().view(-1) < FP16_MIN_NORMAL).squeeze(1)
    if small.numel():
        u = noise.view(-1).index_select(0, small).float().mul_(2.0 ** -_DROPPED)
        tiny = x.view(-1).index_select(0, small).mul_(2.0 ** 24).add_(u).floor_().mul_(2.0 ** -24)
        out.view(-1).index_copy_(0, small, tiny.half())
    return out


def to_half(x: Any, stochastic: bool, generator: Optional[Any] = None) -> Any:
    """fp32 -> fp16, stochastically or to nearest."""
    return stochastic_round_half(x, generator) if stochastic else x.half()


@dataclass
class LossScaler:
    """Static or automatic loss scale (``options.loss_scaling``, ``options.auto_loss_scaling``)."""

    scale: float = 1.0
    """Current loss scale: the loss is multiplied by it before backward, gradients divided by it after."""
    auto: bool = False
    """Adjust the scale every weight update (PopART's rule, see ``ALS_BIN_EDGE``)."""
    bin_edge: float = ALS_BIN_EDGE * FP16_MAX
    """Gradient magnitude separating the histogram's lower and upper bins."""
    threshold: float = ALS_UPPER_PROPORTION
    """Largest tolerated share of gradient elements in the upper bin."""
    skipped: int = 0
    """Weight updates skipped because gradients overflowed (automatic scaling only)."""

    def __post_init__(self) -> None:
        # Validated positive with the config; an optimizer state PopTorch loads may hold any nonzero scale.
        assert float(self.scale) != 0, self.scale

    def upper_share(self, grads: Any) -> float:
        """Share of gradient elements (still multiplied by the scale) at or above the bin edge; inf and nan
        count as upper."""
        import torch

        upper = total = 0
        for g in grads:
            a = g.detach().float().abs()
            upper += int(torch.count_nonzero(~(a < self.bin_edge)))
            total += a.numel()
        return upper / total if total else 0.0

    def update(self, grads: Any) -> bool:
        """After a backward pass: adapt the scale (automatic mode); False when the update must be skipped
        because a gradient is not finite (automatic mode skips such updates, as torch.amp.GradScaler does)."""
        if not self.auto:
            return True
        import torch

        finite = all(bool(torch.isfinite(g).all()) for g in grads)
        self.scale = self.scale / 2 if self.upper_share(grads) > self.threshold else self.scale * 2
        if not finite:
            self.skipped += 1
        return finite

    def state_dict(self) -> Dict[str, Any]:
        return {"scale": self.scale, "skipped": self.skipped}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.scale = float(state["scale"])
        self.skipped = int(state["skipped"])
