"""The attention Transformers models run under ipuexp: each model's own eager attention (scores as real tensors,
as on the IPU) with dropout as one op, and attention masks kept broadcastable."""
from __future__ import annotations

import sys
from typing import Any, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

ATTENTION = "ipuexp"
"""The attention implementation registered with Transformers: the model's eager attention, IPU-style masks."""
_registered = False


class _NativeDropout(TorchFunctionMode):
    """``F.dropout`` as ``aten.native_dropout`` (one op, boolean mask), as ``transformer.Dropout`` does."""

    def __torch_function__(self, func: Any, types: Any, args: Tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is F.dropout:
            names = ("input", "p", "training", "inplace")
            bound = {**dict(zip(names, args)), **kwargs}
            x, p, training = bound["input"], float(bound.get("p", 0.5)), bound.get("training", True)
            return torch.native_dropout(x, p, True)[0] if training and p > 0 else x
        return func(*args, **kwargs)


class HostConstants(TorchFunctionMode):
    """``torch.tensor`` of Python numbers on the host: a model's constants computed from shapes (DeBERTa's
    attention span) are compile-time values of the traced graph, and a capture on meta tensors could not read
    them back (``Tensor.item()``); a 0-dim host tensor mixes with device tensors as a scalar."""

    def __torch_function__(self, func: Any, types: Any, args: Tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.tensor and "device" not in kwargs and args and isinstance(args[0], (int, float, bool)):
            kwargs = {**kwargs, "device": "cpu"}
        return func(*args, **kwargs)


def _eager_attention(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
    """The eager attention of the module's own modelling file (GQA, scaling and soft-capping included)."""
    fn = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    if fn is None:
        raise ValueError(f"model.hf.config: {type(module).__name__} has no eager attention in "
                         f"{type(module).__module__}; allowed: a Transformers model with eager attention")
    with _NativeDropout():
        return fn(module, *args, **kwargs)


def _broadcast_mask(batch_size: int, q_length: int, kv_length: int, q_offset: int = 0, kv_offset: int = 0,
                    mask_function: Any = None, attention_mask: Optional[torch.Tensor] = None,
                    dtype: torch.dtype = torch.float32, device: Any = None, **kwargs: Any) -> Optional[torch.Tensor]:
    """Additive mask left broadcastable: padding [B, 1, 1, S], a causal pattern [1, 1, S, S], both [B, 1, S, S].

    Transformers' eager mask expands every mask to [B, 1, S, S] and first reads the mask's values to skip it when
    nothing is padded, which meta tensors cannot answer."""
    from transformers.masking_utils import bidirectional_mask_function, prepare_padding_mask

    allowed = None
    if mask_function is not None and mask_function is not bidirectional_mask_function:
        index = [torch.arange(n, device=device) for n in (batch_size, 1, q_length, kv_length)]
        allowed = mask_function(index[0][:, None, None, None], index[1][None, :, None, None],
                                (index[2] + q_offset)[None, None, :, None], (index[3] + kv_offset)[None, None, None, :])
    padding = prepare_padding_mask(attention_mask, kv_length, kv_offset)
    if padding is not None:
        keep = padding[:, None, None, :].to(torch.bool)
        allowed = keep if allowed is None else allowed & keep
    if allowed is None:
        return None
    return torch.where(allowed, torch.zeros((), device=allowed.device, dtype=dtype), torch.finfo(dtype).min)


def register() -> None:
    """Register ``ATTENTION`` with Transformers' attention and mask interfaces (once)."""
    global _registered
    if not _registered:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface

        AttentionInterface.register(ATTENTION, _eager_attention)
        AttentionMaskInterface.register(ATTENTION, _broadcast_mask)
        _registered = True
