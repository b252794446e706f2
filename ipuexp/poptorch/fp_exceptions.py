"""``Precision.enableFloatingPointExceptions(True)``: the IPU traps an op whose result overflows, divides by zero or
is invalid (a NaN from 0/0, 0 x inf, the square root of a negative number, an ordered comparison with a NaN), and
PopTorch's call raises. The numerics check each op's floating-point results and raise ``poptorch.Error`` at the
first that is not finite."""
from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Tuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from ipuexp.poptorch.errors import Error


def traps(options: Any) -> ContextManager[Any]:
    """The floating-point checks where the options enable them, else nothing."""
    on = bool(options.Precision.calls.get("Precision.enableFloatingPointExceptions"))
    return FloatingPointExceptions() if on else contextlib.nullcontext()


_ORDERED = {"gt", "lt", "ge", "le", "greater", "less", "greater_equal", "less_equal", "__gt__", "__lt__", "__ge__",
            "__le__"}
"""Ordered comparisons: IEEE 754 makes one with a NaN operand an invalid operation (whose result is a bool)."""


class FloatingPointExceptions(TorchFunctionMode):
    """Raises at the first op whose floating-point result holds an inf or a NaN, or that compares a NaN."""

    def __torch_function__(self, func: Any, types_: Any, args: Tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        if getattr(func, "__name__", "") in _ORDERED and any(
                isinstance(t, torch.Tensor) and t.is_floating_point() and t.device.type != "meta"
                and bool(torch.isnan(t.detach()).any()) for t in tree_flatten((args, kwargs))[0]):
            raise Error(f"Floating point exception: {func.__name__} compared a NaN (an invalid operation) with "
                        "Precision.enableFloatingPointExceptions(True)")
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.device.type != "meta" \
                    and not bool(torch.isfinite(t.detach()).all()):
                name = getattr(func, "__name__", str(func))
                raise Error(f"Floating point exception: {name} produced a value that is not finite (an overflow, "
                            "a division by zero or an invalid operation) with "
                            "Precision.enableFloatingPointExceptions(True)")
        return out
