"""BERT for pre-training (masked LM + next-sentence prediction), split as Graphcore's PopTorch BERT.

Placement follows Graphcore's BERT example, graphcore/examples@3cc8f81 nlp/bert/pytorch/modeling.py:
an embeddings block, one block per encoder layer, and a heads block (pooler + NSP classifier, MLM transform and
decoder tied to the word embedding). Like Graphcore's model, the MLM head only runs on the first ``mask_tokens``
positions: their data pipeline moves the masked tokens to the front of each sequence.

Packed BERT (``sequences_per_pack`` above 1: several sequences in one row, after Graphcore's packed BERT, the MLPerf
Training BERT submissions' PopART code and the "Introducing packed BERT" write-up): each token carries the index of
its sequence in the pack (1, 2, ...; 0 for padding) and its position within its own sequence, so every sequence
gets the position embeddings it would have alone; attention is block-diagonal, each layer building the additive
mask from the sequence indices (``block_mask``), so only the indices travel between pipeline stages; the masked-LM
head gathers ``mask_tokens`` positions of the pack and the pooler and NSP classifier run on each sequence's first
token; losses average over the labelled tokens and sequences (label -100: an empty slot), so a packed micro-batch
gives the same loss and gradients as the same sequences unpacked.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ipuexp.models.blocks import Block, InputSpec, PipelinedModel
from ipuexp.models.transformer import (AttentionHalf, Dropout, FeedForwardHalf, PostNormLayer, block_mask,
                                       init_weights)
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


IGNORE = -100
"""Label of an empty slot (a masked-LM position or sequence slot the pack does not use): no loss."""


class PackedEmbeddings(Embeddings):
    """Word + per-sequence position + token-type embeddings; passes the sequence indices on instead of a mask."""

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, position_ids: torch.Tensor,
                sequence_ids: torch.Tensor, *rest: Any) -> Tuple[Any, ...]:
        h = self.word(input_ids) + self.position(position_ids) + self.token_type(token_type_ids)
        return (self.dropout(self.norm(h)), sequence_ids, *rest)


class PackedLayer(PostNormLayer):
    """An encoder layer whose attention mask is built from the pack's sequence indices."""

    def forward(self, hidden: torch.Tensor, sequence_ids: torch.Tensor, *rest: Any) -> Tuple[Any, ...]:
        h, _, *rest = super().forward(hidden, block_mask(sequence_ids, hidden.dtype), *rest)
        return (h, sequence_ids, *rest)


class PackedPretrainingHeads(PretrainingHeads):
    """The MLM head on the gathered ``mlm_positions`` and the pooler + NSP classifier on each sequence's first
    token; returns (loss, MLM logits)."""

    def forward(self, hidden: torch.Tensor, sequence_ids: torch.Tensor, mlm_positions: torch.Tensor,
                cls_positions: torch.Tensor, mlm_labels: torch.Tensor,
                nsp_labels: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        width = hidden.shape[-1]
        cls = hidden.gather(1, cls_positions.long()[..., None].expand(-1, -1, width))
        nsp_logits = self.nsp(torch.tanh(self.pooler(cls)))
        picked = hidden.gather(1, mlm_positions.long()[..., None].expand(-1, -1, width))
        mlm_logits = self.decoder(self.transform_norm(F.gelu(self.transform(picked))))
        loss = F.cross_entropy(mlm_logits.flatten(0, 1), mlm_labels.flatten().long(), ignore_index=IGNORE) + \
            F.cross_entropy(nsp_logits.flatten(0, 1), nsp_labels.flatten().long(), ignore_index=IGNORE)
        return loss, mlm_logits


def packed_inputs(seq: int, vocab: int, mask_tokens: int, per_pack: int) -> list:
    """The inputs and labels of one pack."""
    return [
        InputSpec("input_ids", (seq,), "int32", high=vocab),
        InputSpec("token_type_ids", (seq,), "int32", high=TYPE_VOCAB),
        InputSpec("position_ids", (seq,), "int32", high=seq),
        InputSpec("sequence_ids", (seq,), "int32", high=per_pack + 1),
        InputSpec("mlm_positions", (mask_tokens,), "int32", high=seq),
        InputSpec("cls_positions", (per_pack,), "int32", high=seq),
        InputSpec("mlm_labels", (mask_tokens,), "int32", is_label=True, high=vocab),
        InputSpec("nsp_labels", (per_pack,), "int32", is_label=True, high=2),
    ]


def build_bert(hp: Dict[str, Any], name: str = "bert") -> PipelinedModel:
    """BERT pre-training model from a variant's hyper-parameters (see ``variants.VARIANTS['bert']``); packed
    (``bert_packed``) when ``hp['sequences_per_pack']`` is above 1."""
    hidden, seq = hp["hidden"], hp["sequence_length"]
    mask_tokens = hp.get("mask_tokens") or mask_tokens_for(seq)
    per_pack = int(hp.get("sequences_per_pack", 1))
    packed = per_pack > 1
    embeddings = (PackedEmbeddings if packed else Embeddings)(hp["vocab"], hidden, hp["max_positions"])
    layer_class = PackedLayer if packed else PostNormLayer
    blocks = [Block("embeddings", embeddings)]
    for i in range(hp["layers"]):
        if hp.get("split_layers"):  # attention and feed-forward as blocks of their own (Graphcore's att_ffn_placement)
            blocks.append(Block(f"layer{i}_attention", AttentionHalf(hidden, hp["heads"], HIDDEN_DROPOUT,
                                                                     ATTENTION_DROPOUT, LAYER_NORM_EPS, packed),
                                is_layer=True))
            blocks.append(Block(f"layer{i}_ffn", FeedForwardHalf(hidden, hp["ffn"], HIDDEN_DROPOUT, LAYER_NORM_EPS),
                                is_layer=True))
            continue
        layer = layer_class(hidden, hp["heads"], hp["ffn"], HIDDEN_DROPOUT, ATTENTION_DROPOUT, LAYER_NORM_EPS)
        blocks.append(Block(f"layer{i}", layer, is_layer=True))
    heads_class = PackedPretrainingHeads if packed else PretrainingHeads
    blocks.append(Block("heads", heads_class(embeddings.word, hidden, mask_tokens)))
    if packed:
        spec = packed_inputs(seq, hp["vocab"], mask_tokens, per_pack)
    else:
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
