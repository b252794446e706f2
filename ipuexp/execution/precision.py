"""Bytes per element implied by Graphcore's X.Y precision notation and the partials type.

"16.16": fp16 activations, gradients and weights; "16.32": fp16 activations/gradients with fp32 master weights;
"32.32": fp32 throughout (the notation of Graphcore performance results; IPU optimisation guide section 5.2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ipuexp.graph.types import TensorInfo

_INT_BYTES = {"int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1}

IO_PRECISION_BYTES = {"float32": 4, "float16": 2, "int8": 1}
"""Bytes per element of each explicit ``data.io_precision`` (IPU optimisation guide section 4.4.3); ``auto`` keeps
the capture's."""


@dataclass(frozen=True)
class PrecisionBytes:
    activation: int
    """Bytes per activation/gradient element."""
    weight: int
    """Bytes per stored weight element."""
    compute: int
    """Bytes per element of matmul/conv inputs (decides the AMP rate)."""


def precision_bytes(precision: str) -> PrecisionBytes:
    act, weight = (int(x) // 8 for x in precision.split("."))
    return PrecisionBytes(activation=act, weight=weight, compute=act)


def partials_bytes(partials_type: str) -> int:
    return 2 if str(partials_type).endswith("half") else 4


def tensor_bytes(tensors: Sequence[TensorInfo], activation_bytes: int) -> int:
    """Float tensors travel at the activation precision; integer tensors keep their dtype."""
    return sum(t.elements * _INT_BYTES.get(t.dtype, activation_bytes) for t in tensors)


def is_float(dtype: str) -> bool:
    """Whether a captured dtype (``float32``, ``float16``, ``bfloat16``, ``half``...) is a floating type: those
    tensors have gradients and travel at the activation precision."""
    return dtype.startswith(("float", "bfloat", "half"))


def float_elements(tensors: Sequence[TensorInfo]) -> int:
    """Elements of the floating-point tensors of ``tensors``."""
    return sum(t.elements for t in tensors if is_float(t.dtype))
