"""PopTorch's checks of a model's buffers at its first call."""
from __future__ import annotations

import pytest
import torch

import ipuexp.poptorch as poptorch


class _Counter(torch.nn.Module):
    """Counts its calls in a buffer: in place, by assignment or by dropping it."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.lin = torch.nn.Linear(2, 2)
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.how == "in_place":
            self.calls.add_(1)
        elif self.how == "assigned":
            self.calls = self.calls + 1
        else:
            del self._buffers["calls"]
        return poptorch.identity_loss(self.lin(x).pow(2), reduction="mean")


@pytest.mark.parametrize("how,message", [("assigned", r"Buffer calls is reassigned within the model .* Consider "
                                          r"using self\.calls\.copy_\(src\)"),
                                         ("dropped", "Buffer calls is removed from the model")])
def test_a_buffer_is_updated_in_place_only(job, how, message):
    with pytest.raises(poptorch.Error, match=message):
        poptorch.inferenceModel(_Counter(how))(torch.randn(2, 2))
    model = _Counter("in_place")
    poptorch.inferenceModel(model)(torch.randn(2, 2))
    assert float(model.calls) == 1


def test_replicas_cannot_broadcast_an_updated_buffer(job):
    opts = poptorch.Options().replicationFactor(2)
    with pytest.raises(poptorch.Error, match=r"does not support broadcasting buffers.*broadcastBuffers\(False\)"):
        poptorch.trainingModel(_Counter("in_place"), opts)(torch.randn(4, 2))
    opts = poptorch.Options().replicationFactor(2)
    opts.broadcastBuffers(False)
    poptorch.trainingModel(_Counter("in_place"), opts)(torch.randn(4, 2))
    bn = torch.nn.Sequential(torch.nn.BatchNorm1d(2), torch.nn.Linear(2, 1))  # BatchNorm keeps its own statistics
    model = poptorch.trainingModel(torch.nn.Sequential(bn, _Loss()), poptorch.Options().replicationFactor(2))
    model(torch.randn(8, 2))


class _Loss(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return poptorch.identity_loss(x.pow(2), reduction="mean")
