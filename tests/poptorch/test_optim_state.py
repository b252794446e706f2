"""The optimizer's device state in ``state_dict()`` (``ipu_state``/``ipu_param``), its variable attributes and the
warning for a subclassed optimizer."""
from __future__ import annotations

import pytest
import torch

import ipuexp.poptorch as poptorch


class _Fit(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return poptorch.identity_loss((self.lin(x) - 1.0).pow(2), reduction="mean")


def test_state_dict_holds_the_device_state_once_compiled(job):
    model = _Fit()
    opt = poptorch.optim.Adam(model.parameters(), lr=0.05, weight_decay=0.025, loss_scaling=0.75)
    training = poptorch.trainingModel(model, optimizer=opt)
    assert opt.state_dict()["ipu_state"] is None and opt.state_dict()["ipu_param"] is None
    x = torch.randn(4, 3)
    training.compile(x)
    s0 = opt.state_dict()
    assert set(s0["ipu_state"]) == {f"{p}___lin.{w}" for p in ("Accl1", "Accl2", "Step") for w in ("weight", "bias")}
    assert not s0["ipu_state"]["Accl1___lin.weight"].any()  # not stepped yet: zeros, as PopART starts them
    assert float(s0["ipu_param"]["learningRate___specific___lin.bias"]) == pytest.approx(0.05)
    assert float(s0["ipu_param"]["lossScaling_FLOAT"]) == 0.75
    training(x)
    s1 = opt.state_dict()
    assert torch.equal(s1["ipu_state"]["Accl1___lin.weight"], opt.state[model.lin.weight]["exp_avg"])
    assert float(s1["ipu_state"]["Step___lin.weight"]) == 1.0


def test_sgd_without_momentum_is_popart_s_sgd0(job):
    model = _Fit()
    opt = poptorch.optim.SGD(model.parameters(), lr=0.05, weight_decay=0.025, loss_scaling=0.75)
    poptorch.trainingModel(model, optimizer=opt).compile(torch.randn(4, 3))
    param = opt.state_dict()["ipu_param"]
    # PopART's compound scalars: lr (1 - dampening) / loss scale and 1 - lr (1 - dampening) weight decay.
    assert float(param["scaledLearningRate0___specific___lin.weight"]) == pytest.approx(0.05 / 0.75)
    assert float(param["weightDecayScaleFactor0___specific___lin.weight"]) == pytest.approx(1 - 0.05 * 0.025)
    assert opt.state_dict()["ipu_state"] == {}
    opt.variable_attrs.markAsVariable("momentum")  # a momentum that may change: the velocity is kept
    poptorch.trainingModel(model, optimizer=opt).compile(torch.randn(4, 3))
    assert "Accl1___lin.weight" in opt.state_dict()["ipu_state"]


def test_loaded_state_is_what_the_next_steps_use(job):
    torch.manual_seed(0)
    model = _Fit()
    opt = poptorch.optim.Adam(model.parameters(), lr=0.0)
    training = poptorch.trainingModel(model, optimizer=opt)
    x = torch.randn(4, 3)
    training.compile(x)
    s0 = opt.state_dict()
    s0["ipu_param"]["learningRate___specific___lin.weight"] = torch.tensor(0.1)
    s0["ipu_state"]["Accl1___lin.bias"] = torch.full((3,), 2.0)
    opt.load_state_dict(s0)
    assert float(opt.state_dict()["ipu_param"]["learningRate___specific___lin.weight"]) == pytest.approx(0.1)
    w, b = model.lin.weight.detach().clone(), model.lin.bias.detach().clone()
    training(x)
    assert not torch.equal(model.lin.weight, w)  # its own learning rate: 0.1
    assert torch.equal(model.lin.bias, b)  # the group's: 0
    assert opt.state[model.lin.bias]["exp_avg"].abs().min() > 1.0  # 0.9 x 2 plus a tenth of the gradient
    s1 = opt.state_dict()
    assert float(s1["ipu_param"]["learningRate___specific___lin.weight"]) == pytest.approx(0.1)
    assert float(s1["ipu_param"]["learningRate___specific___lin.bias"]) == 0.0
    opt.param_groups[0]["lr"] = 0.5  # the groups' own values rule again once they change
    assert float(opt.state_dict()["ipu_param"]["learningRate___specific___lin.weight"]) == 0.5


def test_only_ipu_states_load():
    lin = torch.nn.Linear(2, 1)
    cpu = torch.optim.Adam(lin.parameters())
    with pytest.raises(RuntimeError, match="Only IPU optimizer states can be loaded onto the IPU"):
        poptorch.optim.Adam(lin.parameters()).load_state_dict(cpu.state_dict())


def test_a_checkpoint_resumes_in_a_new_optimizer(job, tmp_path):
    model = _Fit()
    opt = poptorch.optim.Adam(model.parameters(), lr=0.01)
    training = poptorch.trainingModel(model, optimizer=opt)
    x = torch.randn(4, 3)
    training(x)
    torch.save(opt.state_dict(), tmp_path / "opt.pt")
    resumed = poptorch.optim.Adam(model.parameters(), lr=0.3)
    resumed.load_state_dict(torch.load(tmp_path / "opt.pt", weights_only=False))
    training.setOptimizer(resumed)
    assert torch.equal(resumed.state_dict()["ipu_state"]["Accl2___lin.weight"],
                       opt.state[model.lin.weight]["exp_avg_sq"])
    assert resumed.param_groups[0]["lr"] == 0.01


def test_variable_attributes():
    opt = poptorch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    assert not opt.variable_attrs.isConstant("lr") and opt.variable_attrs.isConstant("momentum")
    opt.variable_attrs.markAsVariable("loss_scaling")
    assert not opt.variable_attrs.isConstant("loss_scaling")
    opt.variable_attrs.markAsConstant("lr")
    assert opt.variable_attrs.isConstant("lr")
    with pytest.raises(ValueError, match="Unknown attribute betas"):
        opt.variable_attrs.markAsVariable("betas")


def test_a_subclassed_optimizer_is_warned_about(job, capfd):
    class Mine(poptorch.optim.AdamW):
        pass

    model = _Fit()
    poptorch.trainingModel(model, optimizer=torch.optim.AdamW(model.parameters()))
    assert "Python optimizer code" not in capfd.readouterr().err
    poptorch.trainingModel(model, optimizer=Mine(model.parameters()))
    err = capfd.readouterr().err
    assert "Optimizer `Mine` subclassed" in err and "Poptorch does not run Python optimizer code directly" in err
