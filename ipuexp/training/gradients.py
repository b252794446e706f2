"""One weight update's gradient reduction, as both executors (``training.executor`` for a configuration,
``poptorch.executor`` for a script's model) do it: each replica's accumulated gradients taken from its weights,
the replicas' sums added (the all-reduce of data-parallel training), then divided by accumulation x replicas under
mean reduction (PopTorch's ``accumulationAndReplicationReductionType``, Mean by default) and by the loss scale the
backward passes were multiplied by."""
from __future__ import annotations

from typing import Iterable, List, Optional

import torch


def take_grads(params: Iterable[torch.Tensor]) -> List[torch.Tensor]:
    """The gradients accumulated in ``params`` (zeros where none arrived), which start empty for the next replica."""
    params = list(params)
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    for p in params:
        p.grad = None
    return grads


class GradientReduction:
    """The replicas' gradients of one weight update: summed as the replicas finish, normalised for the update."""

    def __init__(self, accumulation: int, replicas: int, mean: bool, loss_scale: float) -> None:
        self.summed: Optional[List[torch.Tensor]] = None
        self.divisor = (accumulation * replicas if mean else 1) * loss_scale
        """What the sum is divided by: the micro-batches of the update (mean reduction) and the loss scale."""

    def add(self, grads: List[torch.Tensor]) -> None:
        """One replica's gradients added into the sum over the replicas so far (in place: the first replica's
        are the sum)."""
        if self.summed is None:
            self.summed = grads
            return
        for a, b in zip(self.summed, grads):
            a.add_(b)

    @property
    def sums(self) -> List[torch.Tensor]:
        return self.summed or []

    def normalised(self, grad: torch.Tensor) -> torch.Tensor:
        """One summed gradient divided, in place, by ``divisor``."""
        return grad.div_(self.divisor) if self.divisor != 1.0 else grad
