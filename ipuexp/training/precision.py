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


def stochastic_round_half(x: Any, generator: Optional[Any] = None) -> Any:
    """fp32 -> fp16 rounding up or down with probability proportional to the distance to each neighbour.

    The nearest fp16 value ``r`` and its neighbour on the other side of ``x`` bracket ``x``; ``x`` becomes the
    upper one with probability (x - lower) / (upper - lower), so the rounding is unbiased: E[round(x)] = x.
    Stepping the fp16 bit pattern by one moves to the next representable value away from (+1) or towards (-1)
    zero, for either sign, subnormals included.
    """
    import torch

    x = x.float()
    r = x.half()
    rf = r.float()
    step = (x.abs() > rf.abs()).to(torch.int16).mul_(2).sub_(1)
    of = r.view(torch.int16).add(step).view(torch.float16).float()
    lo, hi = torch.minimum(rf, of), torch.maximum(rf, of)
    span = hi - lo
    # span is finite and > 0 unless x is exact, not finite, or next to the top of fp16's range (an inf
    # neighbour): those keep the nearest value, and their quotient (nan or inf) is never chosen
    chosen = torch.where(torch.rand(x.shape, generator=generator, device=x.device) < (x - lo).div_(span), hi, lo)
    inexact = (x != rf).logical_and_(span < float("inf"))
    return torch.where(inexact, chosen, rf).half()


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
