"""``OutputMode.EveryN``: the outputs of every N-th device iteration."""
from __future__ import annotations

import pytest
import torch

import ipuexp.poptorch as poptorch
from ipuexp.poptorch.mapping import options_values


def test_every_nth_device_iteration_returns(job):
    model = torch.nn.Linear(3, 2)
    x = torch.randn(12, 3)
    opts = poptorch.Options().deviceIterations(6)
    opts.outputMode(poptorch.OutputMode.EveryN, output_return_period=3)
    out = poptorch.inferenceModel(model, opts)(x)
    with torch.no_grad():
        expected = model(x).reshape(6, 2, 2)[[2, 5]].reshape(4, 2)  # iterations 3 and 6, 2 samples each
    assert torch.allclose(out, expected)
    assert "outputMode(EveryN, output_return_period=3)" in options_values(opts, False).no_effect


@pytest.mark.parametrize("period,message", [(4, "must be a factor"), (8, "must be <= to the number of batches")])
def test_the_period_divides_the_device_iterations(job, period, message):
    opts = poptorch.Options().deviceIterations(6)
    opts.outputMode(poptorch.OutputMode.EveryN, output_return_period=period)
    with pytest.raises(poptorch.Error, match=message):
        poptorch.inferenceModel(torch.nn.Linear(3, 2), opts)(torch.randn(6, 3))
