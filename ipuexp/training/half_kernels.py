"""fp16 matrix products and convolutions computed as the IPU computes them, at fp32 speed on a CPU: the operands
widened to fp32, the product accumulated in fp32 and the result rounded once to fp16. PopLibs' matmuls and
convolutions accumulate fp16 operands in fp32 partials unless told otherwise (PopTorch's
``Precision.setPartialsType`` defaults to float; Poplar's "partialsType" option, PopLibs ``poplin`` docs), and so
does torch's CPU kernel for fp16 (``at::opmath_type<Half>`` is float); but that kernel runs on a slow path on
CPUs without native fp16 arithmetic (``_slow_conv2d`` for convolutions), ten to a hundred times slower than fp32.
Other ops run as they are."""
from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

_aten = torch.ops.aten
PRODUCTS = frozenset({_aten.mm.default, _aten.addmm.default, _aten.bmm.default, _aten.baddbmm.default,
                      _aten.mv.default, _aten.addmv.default, _aten.dot.default, _aten.convolution.default,
                      _aten.convolution_backward.default})
"""The aten products a model's forward and backward passes decompose into (linear, matmul, conv)."""


def _widen(t: Any) -> Any:
    return t.float() if isinstance(t, torch.Tensor) and t.dtype == torch.float16 else t


def _narrow(t: Any) -> Any:
    return t.half() if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t


class HalfProducts(TorchDispatchMode):
    """Runs the fp16 ``PRODUCTS`` in fp32 and rounds their results to fp16."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in PRODUCTS and any(isinstance(a, torch.Tensor) and a.dtype == torch.float16 for a in args):
            return tree_map(_narrow, func(*tree_map(_widen, args), **tree_map(_widen, kwargs)))
        return func(*args, **kwargs)


def half_products(tensors: Iterable[Any]) -> ContextManager[Any]:
    """``HalfProducts`` where any of ``tensors`` (a model's parameters and inputs) is fp16, else nothing."""
    if any(isinstance(t, torch.Tensor) and t.dtype == torch.float16 for t in tensors):
        return HalfProducts()
    return contextlib.nullcontext()
