"""Options.anchorTensor and getAnchoredTensor: a parameter's gradient as the update applies it, and its value."""
from __future__ import annotations

import pytest
import torch

import ipuexp.poptorch as poptorch
from tests.poptorch.test_checks import job  # noqa: F401 (a fixture)


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 1)

    def forward(self, x):
        out = self.fc(x)
        return out, (out ** 2).mean()


def test_the_gradient_and_the_updated_weight(job):  # noqa: F811
    torch.manual_seed(0)
    model = _Model()
    reference = _Model()
    reference.load_state_dict(model.state_dict())
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(2)
    opts.anchorTensor("grad", "Gradient___fc.weight").anchorTensor("w", "UpdatedVar___fc.weight")
    training = poptorch.trainingModel(model, opts, poptorch.optim.SGD(model.parameters(), lr=0.1,
                                                                      loss_scaling=8.0))
    assert "Gradient___fc.bias" in training.getTensorNames()
    x = torch.randn(4, 3)
    training(x)
    grads = []
    for half in (x[:2], x[2:]):
        reference.zero_grad()
        reference(half)[1].backward()
        grads.append(reference.fc.weight.grad.clone())
    expected = (grads[0] + grads[1]) / 2
    torch.testing.assert_close(training.getAnchoredTensor("grad"), expected)
    torch.testing.assert_close(training.getAnchoredTensor("w"), reference.fc.weight.detach() - 0.1 * expected)
    with pytest.raises(poptorch.Error, match="not defined"):
        training.getAnchoredTensor("other")


def test_an_activation_is_named_as_unsupported(job):  # noqa: F811
    opts = poptorch.Options().anchorTensor("act", "MatMul:0/1")
    with pytest.raises(poptorch.UnsupportedError, match="Options.anchorTensor of 'MatMul:0/1'"):
        poptorch.trainingModel(_Model(), opts)(torch.randn(1, 3))
