"""A .half() model trained as PopTorch trains it on the IPU: the update computed in fp32 from the loss-scaled fp16
gradients, optimizer state in fp32 unless asked for in fp16, weights rounded back into fp16."""
from __future__ import annotations

import pytest
import torch

import ipuexp.poptorch as poptorch
from tests.poptorch.test_checks import job  # noqa: F401 (a fixture)


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x, labels):
        out = torch.log_softmax(self.lin(x), dim=1)
        return out, torch.nn.functional.nll_loss(out, labels)


def test_adamw_on_a_half_model_with_tiny_gradients_stays_finite(job):  # noqa: F811
    torch.manual_seed(0)
    model = _Model().half()
    optimizer = poptorch.optim.AdamW(model.parameters(), lr=1e-3, accum_type=torch.float16, loss_scaling=1024)
    opts = poptorch.Options()
    opts.Precision.enableStochasticRounding(True)
    training = poptorch.trainingModel(model, opts, optimizer)
    x, labels = torch.randn(4, 8).half() * 1e-3, torch.tensor([0, 1, 2, 3])  # gradients below fp16's eps
    for _ in range(20):
        _, loss = training(x, labels)
    assert torch.isfinite(loss) and model.lin.weight.dtype == torch.float16
    assert all(torch.isfinite(p).all() for p in model.parameters())
    state = optimizer.state[model.lin.weight]
    assert state["exp_avg"].dtype == torch.float32  # PopTorch's first/second-order types default to fp32


def test_fp16_state_where_the_optimizer_asks_for_it(job):  # noqa: F811
    torch.manual_seed(0)
    model = _Model().half()
    optimizer = poptorch.optim.Adam(model.parameters(), lr=1e-2, first_order_momentum_accum_type=torch.float16,
                                    second_order_momentum_accum_type=torch.float16)
    training = poptorch.trainingModel(model, poptorch.Options(), optimizer)
    x, labels = torch.randn(4, 8).half(), torch.tensor([0, 1, 2, 3])
    first = float(training(x, labels)[1])
    for _ in range(30):
        loss = float(training(x, labels)[1])
    assert loss < first
    m = optimizer.state[model.lin.weight]["exp_avg"]
    torch.testing.assert_close(m, m.half().float(), rtol=0, atol=0)  # values at fp16 precision


class _Weights(torch.nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(n))

    def forward(self, x):
        return poptorch.identity_loss((x @ self.w).mean(), reduction="none")


def _after_small_updates(job, stochastic: bool) -> torch.Tensor:  # noqa: F811
    """2,000 fp16 weights at 1.0 lowered 100 times by 1e-4 (SGD, gradient 1): fp16's spacing below 1.0 is 2**-11,
    so each update is under half a step."""
    model = _Weights(2000).half()
    opts = poptorch.Options()
    opts.Precision.enableStochasticRounding(stochastic)
    training = poptorch.trainingModel(model, opts, poptorch.optim.SGD(model.parameters(), lr=1e-4))
    for _ in range(100):
        training(torch.ones(2, 2000).half())
    return model.w.detach().float()


def test_stochastic_rounding_keeps_updates_under_half_an_fp16_step(job):  # noqa: F811
    assert torch.all(_after_small_updates(job, stochastic=False) == 1.0)
    w = _after_small_updates(job, stochastic=True)
    assert float(w.mean()) == pytest.approx(0.99, abs=0.002)
