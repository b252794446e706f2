"""A training model's first update reads only its own gradients: a host backward pass before it (a model trained
on the CPU first, its .grad left set) does not add to the device's."""
from __future__ import annotations

import torch

import ipuexp.poptorch as poptorch
from ipuexp.poptorch.ops import loss_of


def test_host_gradients_left_on_the_weights_are_not_applied():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x, y = torch.randn(4, 3), torch.randn(4, 1)

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, a, b):
            out = self.m(a)
            return out, torch.nn.functional.mse_loss(out, b)

    wrapped = WithLoss()
    wrapped(x, y)[1].backward()  # a host pass leaves .grad set
    start = model.weight.detach().clone()
    ref = torch.nn.Linear(3, 1)
    ref.load_state_dict(model.state_dict())
    torch.nn.functional.mse_loss(ref(x), y).backward()
    poptorch.trainingModel(wrapped, optimizer=torch.optim.SGD(wrapped.parameters(), lr=0.1))(x, y)
    torch.testing.assert_close(model.weight.detach(), start - 0.1 * ref.weight.grad)


def test_a_partial_identity_loss_is_not_the_final_loss():
    """PopTorch's final loss is the marked loss no other marked loss is computed from."""
    x = torch.randn(3, requires_grad=True)
    partial = poptorch.identity_loss(x - 1.0, reduction="none")  # not a scalar: it could not start a backward pass
    final = poptorch.identity_loss(partial * partial * 5, reduction="mean")
    assert loss_of((partial, final)) is final
    a, b = poptorch.identity_loss(x.sum(), reduction="sum"), poptorch.identity_loss((2 * x).sum(), reduction="sum")
    assert torch.equal(loss_of((a, b)), a + b)  # independent losses: summed
