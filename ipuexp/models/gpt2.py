"""GPT-2 language model (Radford et al. 2019), split as Graphcore's PopTorch GPT-2 (examples nlp/gpt2/pytorch):
embeddings block, one block per decoder layer, and a head block (final LayerNorm and the LM head tied to the
token embedding, with the next-token loss).
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ipuexp.models.blocks import Block, InputSpec, PipelinedModel
from ipuexp.models.transformer import Dropout, PreNormLayer, init_weights

# GPT-2 hyper-parameters of the released models (openai/gpt-2 hparams, Hugging Face GPT2Config defaults):
# layer_norm_epsilon 1e-5, embd/resid/attn dropout 0.1, GELU with the tanh approximation.
LAYER_NORM_EPS = 1e-5
DROPOUT = 0.1


class Embeddings(nn.Module):
    """Token + learned position embeddings and dropout."""

    def __init__(self, vocab: int, hidden: int, max_positions: int) -> None:
        super().__init__()
        self.token = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_positions, hidden)
        # Position ids as a constant buffer, as in the reference implementations (no arange op per step).
        self.register_buffer("position_ids", torch.arange(max_positions).unsqueeze(0), persistent=False)
        self.dropout = Dropout(DROPOUT)

    def forward(self, input_ids: torch.Tensor, *labels: Any) -> Tuple[Any, ...]:
        positions = self.position_ids[:, : input_ids.shape[1]]
        return (self.dropout(self.token(input_ids) + self.position(positions)), *labels)


class LMHead(nn.Module):
    """Final LayerNorm, vocabulary projection tied to the token embedding, cross-entropy on next tokens."""

    def __init__(self, token_embedding: nn.Embedding, hidden: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)
        self.lm_head = nn.Linear(hidden, token_embedding.num_embeddings, bias=False)
        self.lm_head.weight = token_embedding.weight  # tied (GPT-2 has no separate output matrix)

    def forward(self, hidden: torch.Tensor, labels: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        logits = self.lm_head(self.norm(hidden))
        # labels are the inputs shifted by one token (the data pipeline does the shift, as Graphcore's does).
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten().long())
        return loss, logits


def build_gpt2(hp: Dict[str, Any], name: str = "gpt2") -> PipelinedModel:
    """GPT-2 from a variant's hyper-parameters (see ``variants.VARIANTS['gpt2']``)."""
    hidden, seq = hp["hidden"], hp["sequence_length"]
    embeddings = Embeddings(hp["vocab"], hidden, hp["max_positions"])
    blocks = [Block("embeddings", embeddings)]
    for i in range(hp["layers"]):
        layer = PreNormLayer(hidden, hp["heads"], hp["ffn"], DROPOUT, DROPOUT, LAYER_NORM_EPS,
                             causal=True, gelu_approximate="tanh", reciprocal_scale=True)
        blocks.append(Block(f"layer{i}", layer, is_layer=True))
    blocks.append(Block("head", LMHead(embeddings.token, hidden)))
    spec = [
        InputSpec("input_ids", (seq,), "int32", high=hp["vocab"]),
        InputSpec("labels", (seq,), "int32", is_label=True, high=hp["vocab"]),
    ]
    hparams = {**hp, "layer_norm_eps": LAYER_NORM_EPS, "dropout": DROPOUT}
    model = PipelinedModel(blocks, name=name, input_spec=spec, hparams=hparams)
    init_weights(model)
    return model
