"""GroupBERT (Chiley et al., "GroupBERT: Enhanced Transformer Architecture with Efficient Grouped Structures",
2021; Optimum Graphcore's ``models/groupbert``), which Transformers does not have, as a user's own model.

Each layer adds a convolution module to BERT's (pointwise projection with a gated linear unit, a depthwise 1-D
convolution over the tokens, pointwise projection) before the attention, and replaces the dense feed-forward by a
grouped one whose down projection runs in groups: the grouped matmul is a batched product over the groups.

    python -m ipuexp model.name=custom model.target=examples.groupbert:build \\
        data.micro_batch_size=8 options.gradient_accumulation=256 options.pipeline.layers_per_ipu=[0,4,4,4] \\
        options.replication_factor=4
"""
from __future__ import annotations

from typing import Any, Tuple

import torch
from torch import nn
from torch.nn import functional as F

import ipuexp


class Embeddings(nn.Module):
    def __init__(self, vocab: int, d: int, seq: int) -> None:
        super().__init__()
        self.words, self.positions = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> Tuple[Any, ...]:
        positions = torch.arange(ids.shape[1], device=ids.device)
        return self.norm(self.words(ids) + self.positions(positions)), labels


class ConvModule(nn.Module):
    """Pointwise projection to 2d with a GLU, depthwise convolution over the tokens, norm, pointwise projection."""

    def __init__(self, d: int, kernel: int = 7) -> None:
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.Linear(d, d)
        self.depthwise = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.group_norm = nn.GroupNorm(1, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.glu(self.up(self.norm(x)), dim=-1).transpose(1, 2)
        y = F.gelu(self.group_norm(self.depthwise(y))).transpose(1, 2)
        return x + self.down(y)


class GroupedFeedForward(nn.Module):
    """Dense up projection, then the down projection in ``groups`` independent groups (a batched matmul)."""

    def __init__(self, d: int, groups: int = 4) -> None:
        super().__init__()
        self.norm, self.up, self.groups = nn.LayerNorm(d), nn.Linear(d, 4 * d), groups
        self.down = nn.Parameter(torch.empty(groups, 4 * d // groups, d // groups))
        nn.init.normal_(self.down, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.up(self.norm(x)))
        b, s, _ = h.shape
        h = h.reshape(b * s, self.groups, -1).transpose(0, 1)  # [groups, tokens, 4d / groups]
        return x + torch.bmm(h, self.down).transpose(0, 1).reshape(b, s, -1)


class Layer(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.conv, self.ffn = ConvModule(d), GroupedFeedForward(d)
        self.norm, self.attention = nn.LayerNorm(d), nn.MultiheadAttention(d, heads, batch_first=True)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> Tuple[Any, ...]:
        x = self.conv(x)
        y = self.norm(x)
        x = x + self.attention(y, y, y, need_weights=False)[0]
        return self.ffn(x), labels


class MaskedLMHead(nn.Module):
    """Masked-LM on the first ``mask_tokens`` positions (the masked ones, moved to the front), as Graphcore's BERT."""

    def __init__(self, d: int, vocab: int, mask_tokens: int) -> None:
        super().__init__()
        self.transform, self.norm, self.decoder = nn.Linear(d, d), nn.LayerNorm(d), nn.Linear(d, vocab)
        self.mask_tokens = mask_tokens

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> Tuple[Any, ...]:
        logits = self.decoder(self.norm(F.gelu(self.transform(x[:, : self.mask_tokens]))))
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten().long()), logits


def build(layers: int = 12, d: int = 768, heads: int = 12, seq: int = 128, vocab: int = 30528,
          mask_tokens: int = 20) -> ipuexp.PipelinedModel:
    blocks = [ipuexp.Block("embeddings", Embeddings(vocab, d, seq))]
    blocks += [ipuexp.Block(f"layer{i}", Layer(d, heads), is_layer=True) for i in range(layers)]
    blocks.append(ipuexp.Block("heads", MaskedLMHead(d, vocab, mask_tokens)))
    blocks[-1].module.decoder.weight = blocks[0].module.words.weight  # tied, as BERT's
    return ipuexp.PipelinedModel(blocks, name="groupbert_base", input_spec=[
        ipuexp.InputSpec("input_ids", (seq,), dtype="int32", high=vocab),
        ipuexp.InputSpec("labels", (mask_tokens,), dtype="int32", is_label=True, high=vocab),
    ])
