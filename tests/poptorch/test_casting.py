"""fp16 activations meeting fp32 weights (and the reverse) computed as PopTorch casts them."""
from __future__ import annotations

import torch

import ipuexp.poptorch as poptorch
from tests.poptorch.test_checks import job  # noqa: F401 (a fixture)


def test_half_activations_read_the_weights_in_half(job):  # noqa: F811
    model = torch.nn.Linear(10, 20)
    assert poptorch.inferenceModel(model)(torch.ones(2, 10).half()).dtype == torch.half
    assert poptorch.inferenceModel(model.half())(torch.ones(2, 10)).dtype == torch.float
    conv = torch.nn.Conv1d(4, 5, 2)
    assert poptorch.inferenceModel(conv)(torch.ones(1, 4, 4).half()).dtype == torch.half


def test_fp32_master_weights_train_on_fp16_activations(job):  # noqa: F811
    torch.manual_seed(0)

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(10, 10)

        def forward(self, x, target):
            out = self.linear(x)
            return out, torch.nn.functional.mse_loss(out, target)

    model = Model()
    training = poptorch.trainingModel(model, optimizer=poptorch.optim.SGD(model.parameters(), lr=0.1))
    x, target = torch.randn(1, 10).half(), torch.randn(1, 10).half()
    _, first = training(x, target)
    for _ in range(200):
        out, loss = training(x, target)
    assert out.dtype == torch.half and model.linear.weight.dtype == torch.float32
    assert float(loss) < 0.01 * float(first)
