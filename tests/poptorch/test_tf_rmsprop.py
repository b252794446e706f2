"""RMSprop(use_tf_variant=True): TensorFlow's RMSprop."""
from __future__ import annotations

import torch

import ipuexp.poptorch as poptorch


def _one_step(**kwargs):
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    opt = poptorch.optim.RMSprop([w], lr=0.1, alpha=0.9, eps=1e-3, **kwargs)
    w.grad = torch.tensor([0.5, 2.0])
    opt.step()
    return w.detach(), opt


def test_tf_variant_starts_at_ones_with_eps_inside_the_root():
    w, opt = _one_step(use_tf_variant=True)
    g = torch.tensor([0.5, 2.0])
    ms = 0.9 * 1.0 + 0.1 * g * g  # the accumulator starts at ones
    assert torch.allclose(w, torch.tensor([1.0, -2.0]) - 0.1 * g / (ms + 1e-3).sqrt())
    assert torch.allclose(opt.state_dict()["state"][0]["square_avg"], ms)
    torch_w, _ = _one_step()
    assert not torch.allclose(w, torch_w)


def test_tf_variant_momentum_carries_the_learning_rate():
    w, opt = _one_step(use_tf_variant=True, momentum=0.5)
    g = torch.tensor([0.5, 2.0])
    buf = 0.1 * g / (0.9 + 0.1 * g * g + 1e-3).sqrt()
    assert torch.allclose(opt.state[opt.param_groups[0]["params"][0]]["momentum_buffer"], buf)
    assert torch.allclose(w, torch.tensor([1.0, -2.0]) - buf)
