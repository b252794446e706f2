"""PopTorch's checks when a model takes an optimizer: unknown attributes warned about once, the reduction fp16
accumulators need, and the device's update run whatever the instance's ``step``."""
from __future__ import annotations

import pytest
import torch

import ipuexp.poptorch as poptorch


class _Fit(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return poptorch.identity_loss(self.b(self.a(x)).pow(2), reduction="mean")


def _groups(model):
    return [{"params": model.a.parameters()}, {"params": model.b.parameters()}]


@pytest.mark.parametrize("relaxed", [False, True])
def test_unknown_attributes_added_after_the_first_use_are_warned_about_once(job, capfd, relaxed):
    model = _Fit()
    opts = poptorch.Options()
    if relaxed:
        opts.relaxOptimizerAttributesChecks()
    opt = poptorch.optim.SGD(_groups(model), lr=0.01)
    opt.first = 1  # there at the first use: recorded
    training = poptorch.trainingModel(model, opts, opt)
    x = torch.randn(2, 3)
    training(x)
    opt.later = 2
    opt.param_groups[1]["initial_lr"] = 0.1
    training.setOptimizer(opt)
    err = capfd.readouterr().err
    if relaxed:
        assert "Ignoring unexpected" not in err
        return
    assert "Ignoring unexpected optimizer attribute in SGD optimizer: ['later']" in err
    assert "Ignoring unexpected group 1 attribute in SGD optimizer: ['initial_lr']" in err
    warned = [line for line in err.splitlines() if "Ignoring unexpected" in line]
    assert not [line for line in warned if "first" in line or "group 0" in line]
    training.setOptimizer(opt)
    assert "Ignoring unexpected" not in capfd.readouterr().err


def test_the_instance_s_step_is_not_the_device_s(job):
    model = _Fit()
    opt = poptorch.optim.SGD(model.parameters(), lr=0.1)
    training = poptorch.trainingModel(model, optimizer=opt)
    opt.step = 0  # PopTorch never runs Python optimizer code
    before = model.a.weight.detach().clone()
    training(torch.randn(2, 3))
    assert not torch.equal(model.a.weight, before)


def test_fp16_accumulators_take_the_running_mean(job):
    model = _Fit()
    opts = poptorch.Options()
    opt = poptorch.optim.Adam(model.parameters(), lr=0.1, accum_type=torch.half)
    assert opt.accum_type == torch.half and opt.velocity_scaling is None  # PopTorch's arguments as attributes
    training = poptorch.trainingModel(model, opts, opt)
    training.compile(torch.randn(2, 3))
    running = poptorch.MeanReductionStrategy.Running
    assert training.options.Training.meanAccumulationAndReplicationReductionStrategy == running
    other = poptorch.trainingModel(_Fit(), opts, poptorch.optim.Adam(model.parameters(), lr=0.1))
    other.compile(torch.randn(2, 3))
    late = poptorch.optim.Adam(model.parameters(), lr=0.1)
    late.accum_type = torch.half
    assert late.poptorch_args["accum_type"] == torch.half
    with pytest.raises(ValueError, match="executable is already compiled"):
        other.setOptimizer(late)
