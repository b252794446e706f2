"""A model's own random number generator, and the int32 the IPU returns for int64 outputs."""
from __future__ import annotations

import torch

import ipuexp.poptorch as poptorch


class _Noise(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.randn_like(x)


def test_the_seed_option_seeds_the_model_s_generator(job):
    opts = poptorch.Options().randomSeed(42)
    x = torch.zeros(2, 3)
    first, second = poptorch.inferenceModel(_Noise(), opts), poptorch.inferenceModel(_Noise(), opts)
    a = first(x)
    torch.rand(5)  # the host's draws do not move the models' generators
    assert torch.equal(a, second(x))
    assert not torch.equal(first(x), a)  # the state carries on from call to call
    other = poptorch.inferenceModel(_Noise(), poptorch.Options().randomSeed(7))
    assert not torch.equal(other(x), a)


def test_without_a_seed_torch_s_seed_reproduces(job):
    runs = []
    for _ in range(2):
        torch.manual_seed(3)
        runs.append(poptorch.inferenceModel(_Noise())(torch.zeros(4)))
    assert torch.equal(*runs)


def test_int64_outputs_come_back_as_int32(job):
    class ArgMax(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.argmax(dim=1)

    out = poptorch.inferenceModel(ArgMax())(torch.tensor([[0.0, 2.0], [3.0, 1.0]]))
    assert out.dtype == torch.int32 and out.tolist() == [1, 0]
