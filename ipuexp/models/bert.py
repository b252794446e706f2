"""BERT for pre-training (masked LM + next-sentence prediction), split as Graphcore's PopTorch BERT.

Placement follows Graphcore's BERT example, graphcore/examples@3cc8f81 nlp/bert/pytorch/modeling.py:
an embeddings block, one block per encoder layer, and a heads block (pooler + NSP classifier, MLM transform and
decoder tied to the word embedding). Like Graphcore's model, the MLM head only runs on the first ``mask_tokens``
positions: their data pipeline moves the masked tokens to the front of each sequence.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ipuexp.models.blocks import Block, InputSpec, PipelinedModel
from ipuexp.models.transformer import Dropout, PostNormLayer, init_weights
from ipuexp.models.variants import published_mask_tokens

# configs_pretraining.yml `defaults` (examples@3cc8f81): layer_norm_eps 0.001, attention_probs_dropout_prob 0.0.
LAYER_NORM_EPS = 1e-3
ATTENTION_DROPOUT = 0.0
# hidden_dropout_prob 0.1: Devlin et al. 2019, and Graphcore's TF BERT pretrain_large_128_phase1.json (187775b).
HIDDEN_DROPOUT = 0.1
TYPE_VOCAB = 2


def mask_tokens_for(sequence_length: int) -> int:
    """Graphcore's published value, else BERT's 15% masking rate (Devlin et al. 2019, 3.1) rounded."""
    published = published_mask_tokens(sequence_length)
    if published is not None:
        return published
    return max(1, min(sequence_length, round(0.15 * sequence_length)))


class Embeddings(nn.Module):
    """Word + position + token-type embeddings, LayerNorm, dropout; builds the additive attention mask."""

    def __init__(self, vocab: int, hidden: int, max_positions: int) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_positions, hidden)
        # Position ids as a constant buffer, as in the reference implementations (no arange op per step).
        self.register_buffer("position_ids", torch.arange(max_positions).unsqueeze(0), persistent=False)
        self.token_type = nn.Embedding(TYPE_VOCAB, hidden)
        self.norm = nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)
        self.dropout = Dropout(HIDDEN_DROPOUT)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attention_mask: torch.Tensor,
                *labels: Any) -> Tuple[Any, ...]:
        positions = self.position_ids[:, : input_ids.shape[1]]
        h = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        h = self.dropout(self.norm(h))
        # [B, 1, 1, S]: 0 where attended, -10000 where padded (the original BERT implementation's constant).
        mask = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * -10000.0
        return (h, mask, *labels)


class PretrainingHeads(nn.Module):
    """Pooler + NSP classifier and the MLM head on the first ``mask_tokens`` positions; returns (loss, logits)."""

    def __init__(self, word_embedding: nn.Embedding, hidden: int, mask_tokens: int) -> None:
        super().__init__()
        vocab = word_embedding.num_embeddings
        self.mask_tokens = mask_tokens
        self.pooler = nn.Linear(hidden, hidden)
        self.nsp = nn.Linear(hidden, 2)
        self.transform = nn.Linear(hidden, hidden)
        self.transform_norm = nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)
        self.decoder = nn.Linear(hidden, vocab)
        self.decoder.weight = word_embedding.weight  # tied, as in BERT and Graphcore's model

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor, mlm_labels: torch.Tensor,
                nsp_labels: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        nsp_logits = self.nsp(torch.tanh(self.pooler(hidden[:, 0])))
        masked = self.transform_norm(F.gelu(self.transform(hidden[:, : self.mask_tokens])))
        mlm_logits = self.decoder(masked)
        loss = F.cross_entropy(mlm_logits.flatten(0, 1), mlm_labels.flatten().long()) + \
            F.cross_entropy(nsp_logits, nsp_labels.long())
        return loss, mlm_logits

    def extra_repr(self) -> str:
        return f"mask_tokens={self.mask_tokens}"


def build_bert(hp: Dict[str, Any], name: str = "bert") -> PipelinedModel:
    """BERT pre-training model from a variant's hyper-parameters (see ``variants.VARIANTS['bert']``)."""
    hidden, seq = hp["hidden"], hp["sequence_length"]
    mask_tokens = hp.get("mask_tokens") or mask_tokens_for(seq)
    embeddings = Embeddings(hp["vocab"], hidden, hp["max_positions"])
    blocks = [Block("embeddings", embeddings)]
    for i in range(hp["layers"]):
        layer = PostNormLayer(hidden, hp["heads"], hp["ffn"], HIDDEN_DROPOUT, ATTENTION_DROPOUT, LAYER_NORM_EPS)
        blocks.append(Block(f"layer{i}", layer, is_layer=True))
    blocks.append(Block("heads", PretrainingHeads(embeddings.word, hidden, mask_tokens)))
    spec = [
        InputSpec("input_ids", (seq,), "int32", high=hp["vocab"]),
        InputSpec("token_type_ids", (seq,), "int32", high=TYPE_VOCAB),
        InputSpec("attention_mask", (seq,), "int32", high=2),
        InputSpec("mlm_labels", (mask_tokens,), "int32", is_label=True, high=hp["vocab"]),
        InputSpec("nsp_labels", (), "int32", is_label=True, high=2),
    ]
    hparams = {**hp, "mask_tokens": mask_tokens, "layer_norm_eps": LAYER_NORM_EPS,
               "hidden_dropout": HIDDEN_DROPOUT, "attention_dropout": ATTENTION_DROPOUT}
    model = PipelinedModel(blocks, name=name, input_spec=spec, hparams=hparams)
    init_weights(model)
    return model
