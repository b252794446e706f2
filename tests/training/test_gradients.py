"""The gradient reduction both executors share: replicas summed in place, taken gradients cleared, the divisor of
mean and sum reduction with the loss scale."""
from __future__ import annotations

import torch

from ipuexp.training.gradients import GradientReduction, take_grads


def test_replicas_are_summed_and_normalised_by_the_update_s_micro_batches_and_loss_scale():
    red = GradientReduction(accumulation=4, replicas=2, mean=True, loss_scale=128.0)
    assert red.sums == []
    red.add([torch.tensor([1.0, 2.0])])
    red.add([torch.tensor([3.0, 4.0])])
    assert torch.equal(red.sums[0], torch.tensor([4.0, 6.0]))
    assert red.divisor == 4 * 2 * 128.0
    assert torch.equal(red.normalised(red.sums[0].clone()), torch.tensor([4.0, 6.0]) / 1024.0)


def test_sum_reduction_divides_by_the_loss_scale_alone_and_one_leaves_the_tensor():
    assert GradientReduction(4, 2, mean=False, loss_scale=8.0).divisor == 8.0
    g = torch.tensor([3.0])
    assert GradientReduction(4, 2, mean=False, loss_scale=1.0).normalised(g) is g


def test_taken_gradients_leave_the_weights_empty_and_missing_ones_are_zeros():
    a, b = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(3))
    (a.sum() * 2).backward()
    grads = take_grads([a, b])
    assert torch.equal(grads[0], torch.full((2,), 2.0)) and torch.equal(grads[1], torch.zeros(3))
    assert a.grad is None and b.grad is None
