"""Transformer layers shared by the BERT, GPT-2 and ViT zoo models.

Attention is written out (two batched matmuls around a softmax) rather than fused, because that is how it runs
on the IPU with PopTorch: the [batch, heads, seq, seq] scores are real tensors that take memory and are kept
for the backward pass.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

INIT_STD = 0.02
"""Weight initialisation of BERT, GPT-2 and ViT: N(0, 0.02) (BERT/GPT-2 ``initializer_range``)."""


def init_weights(model: nn.Module, std: float = INIT_STD) -> None:
    """Linear and embedding weights ~ N(0, std), biases 0 (LayerNorm keeps ones/zeros).

    PyTorch's default initialisers give unit-variance embeddings, which with a tied decoder start the MLM loss
    near 60 instead of log(vocab). Nothing to do on the meta device (no values).
    """
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)) and m.weight.device.type != "meta":
            with torch.no_grad():
                m.weight.normal_(0.0, std)
                if getattr(m, "bias", None) is not None:
                    m.bias.zero_()


class Dropout(nn.Module):
    """Dropout as one op (``aten.native_dropout``) keeping a boolean mask for the backward pass.

    ``nn.Dropout`` on CPU and meta tensors expands into four ops and keeps a float mask; a single dropout op
    with a 1-byte mask is what an accelerator runs.
    """

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = float(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        return torch.native_dropout(x, self.p, True)[0]

    def extra_repr(self) -> str:
        return f"p={self.p}"


class SelfAttention(nn.Module):
    """Multi-head self-attention with separate Q, K, V projections and an output projection."""

    def __init__(self, hidden: int, heads: int, attn_dropout: float = 0.0, causal: bool = False,
                 reciprocal_scale: bool = False) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden size {hidden} is not divisible by {heads} attention heads")
        self.heads = heads
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)
        self.attn_dropout = Dropout(attn_dropout)
        self.causal = causal
        # Graphcore's BERT and GPT-2 scale the scores by a multiply with 1/sqrt(d) ("reciprocal multiply for
        # speed", examples' bert_fused_attention.py and optimized_gpt2_attn.py; PopART's bert_model.py alike); its
        # ViT divides, which PopLibs runs as a slower DIVIDE (emulator/cost.py).
        self.reciprocal_scale = reciprocal_scale

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, additive_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2))
        if self.reciprocal_scale:
            scores = scores * (1.0 / math.sqrt(self.head_dim))
        else:
            scores = scores / math.sqrt(self.head_dim)
        if additive_mask is not None:
            scores = scores + additive_mask
        if self.causal:
            # GPT-2's causal mask, a constant on the device, subtracted as Graphcore's GPT-2 does it
            # (`attn_weights -= 1e4 * (1 - causal_mask)`, examples' optimized_gpt2_attn.py): a multiply and an add,
            # vectorised, where a masked_fill would run PopLibs' scalar select.
            keep = torch.ones(s, s, dtype=scores.dtype, device=x.device).tril()
            scores = scores - 10000.0 * (1.0 - keep)
        probs = self.attn_dropout(F.softmax(scores, dim=-1))
        context = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        return self.out(context)


def block_mask(sequence_ids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[B, 1, S, S] additive mask of packed sequences: 0 where query and key belong to the same sequence of the
    row, -10000 elsewhere (and for padding, sequence index 0)."""
    same = sequence_ids[:, None, :, None] == sequence_ids[:, None, None, :]
    keep = same & (sequence_ids[:, None, None, :] > 0)
    return (~keep).to(dtype) * -10000.0


class AttentionHalf(nn.Module):
    """The first half of a post-norm encoder layer: attention, residual add, LayerNorm. With ``packed`` its mask
    argument holds the row's sequence indices, from which it builds the block-diagonal mask."""

    def __init__(self, hidden: int, heads: int, dropout: float, attn_dropout: float, eps: float,
                 packed: bool = False) -> None:
        super().__init__()
        self.attention = SelfAttention(hidden, heads, attn_dropout, reciprocal_scale=True)
        self.norm = nn.LayerNorm(hidden, eps=eps)
        self.dropout = Dropout(dropout)
        self.packed = packed

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor, *rest: Any) -> Tuple[Any, ...]:
        additive = block_mask(mask, hidden.dtype) if self.packed else mask
        return (self.norm(hidden + self.dropout(self.attention(hidden, additive))), mask, *rest)


class FeedForwardHalf(nn.Module):
    """The second half of a post-norm encoder layer: feed-forward, residual add, LayerNorm."""

    def __init__(self, hidden: int, ffn: int, dropout: float, eps: float) -> None:
        super().__init__()
        self.intermediate = nn.Linear(hidden, ffn)
        self.output = nn.Linear(ffn, hidden)
        self.norm = nn.LayerNorm(hidden, eps=eps)
        self.dropout = Dropout(dropout)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor, *rest: Any) -> Tuple[Any, ...]:
        return (self.norm(hidden + self.dropout(self.output(F.gelu(self.intermediate(hidden))))), mask, *rest)


class PostNormLayer(nn.Module):
    """BERT encoder layer: attention and feed-forward, each followed by residual add and LayerNorm."""

    def __init__(self, hidden: int, heads: int, ffn: int, dropout: float, attn_dropout: float, eps: float) -> None:
        super().__init__()
        self.attention = SelfAttention(hidden, heads, attn_dropout, reciprocal_scale=True)
        self.attention_norm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Linear(hidden, ffn)
        self.output = nn.Linear(ffn, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=eps)
        self.dropout = Dropout(dropout)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor, *rest: Any) -> Tuple[Any, ...]:
        h = self.attention_norm(hidden + self.dropout(self.attention(hidden, mask)))
        h = self.output_norm(h + self.dropout(self.output(F.gelu(self.intermediate(h)))))
        return (h, mask, *rest)


class PreNormLayer(nn.Module):
    """GPT-2 / ViT layer: LayerNorm before attention and before the MLP, residual adds after."""

    def __init__(self, hidden: int, heads: int, ffn: int, dropout: float, attn_dropout: float, eps: float,
                 causal: bool = False, gelu_approximate: str = "none", reciprocal_scale: bool = False) -> None:
        super().__init__()
        self.attention_norm = nn.LayerNorm(hidden, eps=eps)
        self.attention = SelfAttention(hidden, heads, attn_dropout, causal=causal, reciprocal_scale=reciprocal_scale)
        self.mlp_norm = nn.LayerNorm(hidden, eps=eps)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)
        self.dropout = Dropout(dropout)
        self.gelu_approximate = gelu_approximate

    def forward(self, hidden: torch.Tensor, *rest: Any) -> Tuple[Any, ...]:
        h = hidden + self.dropout(self.attention(self.attention_norm(hidden)))
        mlp = self.fc2(F.gelu(self.fc1(self.mlp_norm(h)), approximate=self.gelu_approximate))
        return (h + self.dropout(mlp), *rest)

    def extra_repr(self) -> str:
        return f"gelu_approximate={self.gelu_approximate!r}"
