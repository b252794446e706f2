"""Which samples each host call, instance, replica and micro-batch consumes.

One host call consumes micro-batch x device iterations x gradient accumulation x replicas samples (PopTorch's
batching rule, ``poptorch.Options`` in the PopTorch user guide). The samples of an epoch are put in one order
(shuffled with the run's seed and the epoch number, identical in every instance: PopTorch requires the same
seed in all processes when shuffling, [git] poptorch docs/user_guide/experimental.rst). Host call c takes the
next contiguous block of that order, laid out as

    [device iteration, instance, local replica, micro-batch, sample]

so each weight update sees the same global batch whatever the split into instances, replicas and
accumulation, and the data is sharded per instance and then per replica (the IPU-POD scaling talk, "Scaled
training": the dataset is split into one subset per instance, then each replica gets its own subset).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Tuple


@dataclass(frozen=True)
class BatchLayout:
    """Batch sizes of a run."""

    micro_batch_size: int
    """Samples per micro-batch."""
    gradient_accumulation: int
    """Micro-batches per replica and weight update."""
    device_iterations: int
    """Weight updates (training) or forward iterations (inference) per host call."""
    replicas: int
    """Replicas in all instances together."""
    instances: int = 1
    """Host processes sharing the replicas."""

    def __post_init__(self) -> None:
        # Validated with the config (one rule table); invariants here.
        assert min(self.micro_batch_size, self.gradient_accumulation, self.device_iterations, self.replicas,
                   self.instances) >= 1, self
        assert self.replicas % self.instances == 0, self

    @property
    def local_replicas(self) -> int:
        return self.replicas // self.instances

    @property
    def samples_per_iteration(self) -> int:
        """Samples of one device iteration (a weight update in training) over all replicas."""
        return self.micro_batch_size * self.gradient_accumulation * self.replicas

    @property
    def samples_per_call(self) -> int:
        """Samples of one host call over all instances."""
        return self.samples_per_iteration * self.device_iterations


def epoch_order(num_samples: int, seed: int, epoch: int, shuffle: bool = True) -> Any:
    """Sample indices of one epoch: a permutation drawn from (seed, epoch), or 0..n-1 without shuffling."""
    import torch

    if not shuffle:
        return torch.arange(num_samples)
    g = torch.Generator().manual_seed(int(seed) * 1_000_003 + int(epoch))
    return torch.randperm(num_samples, generator=g)


def host_calls(num_samples: int, layout: BatchLayout, drop_last: bool = True) -> List[Tuple[int, int]]:
    """(first sample, device iterations) of each host call over ``num_samples`` samples.

    Training drops the incomplete last call (``poptorch.DataLoader``'s ``drop_last=True`` default). Inference
    keeps the whole device iterations of the remainder as a shorter call, so every held-out sample is scored
    up to the last incomplete iteration.
    """
    per_call, per_iter = layout.samples_per_call, layout.samples_per_iteration
    full = num_samples // per_call
    calls = [(c * per_call, layout.device_iterations) for c in range(full)]
    rest_iters = (num_samples - full * per_call) // per_iter
    if not drop_last and rest_iters:
        calls.append((full * per_call, rest_iters))
    return calls


def instance_indices(order: Any, start: int, iterations: int, layout: BatchLayout, instance: int) -> Any:
    """Indices for one instance's part of a host call: shape [iterations, local replicas, GA, micro-batch]."""
    block = order[start:start + iterations * layout.samples_per_iteration]
    shaped = block.reshape(iterations, layout.instances, layout.local_replicas,
                           layout.gradient_accumulation, layout.micro_batch_size)
    return shaped[:, instance]
