"""fp16 products computed in fp32 and rounded once: the same values as torch's own fp16 kernels, in fp16, forward
and backward."""
from __future__ import annotations

import torch

from ipuexp.training.half_kernels import HalfProducts, half_products


def test_products_match_fp32_rounded_once():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3).half()
    lin = torch.nn.Linear(4 * 6 * 6, 5).half()
    x = torch.randn(2, 3, 8, 8).half().requires_grad_()
    with HalfProducts():
        out = lin(conv(x).flatten(1))
        out.float().sum().backward()
    assert out.dtype == torch.float16 and x.grad.dtype == conv.weight.grad.dtype == torch.float16
    ref_conv = torch.nn.functional.conv2d(x.detach().float(), conv.weight.float(), conv.bias.float()).half()
    ref = torch.nn.functional.linear(ref_conv.flatten(1).float(), lin.weight.float(), lin.bias.float()).half()
    assert torch.equal(out.detach(), ref)
    plain = [p.grad.clone() for p in (*conv.parameters(), *lin.parameters())]
    for p in (*conv.parameters(), *lin.parameters()):
        p.grad = None
    lin(conv(x.detach()).flatten(1)).float().sum().backward()  # torch's fp16 kernels
    for a, b in zip(plain, (p.grad for p in (*conv.parameters(), *lin.parameters()))):
        torch.testing.assert_close(a.float(), b.float(), rtol=2e-3, atol=2e-3)


def test_only_where_fp16_meets():
    assert not isinstance(half_products([torch.ones(2)]), HalfProducts)
    assert isinstance(half_products([torch.ones(2), torch.ones(2).half()]), HalfProducts)
