"""The heads block of a Transformers model: the backbone's tail (final norm, pooler), the task head and its loss.

The loss is computed in the block, as in ipuexp's own models, so a training step counts its FLOPs. Masked-LM
heads run on the first ``mask_tokens`` positions only, as Graphcore's PopTorch BERT does (its data pipeline moves
the masked tokens to the front; ipuexp's BERT follows the same rule), rather than on every position as
Transformers' ``BertForPreTraining`` does: that is what a BERT pre-training run on the IPU computes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ipuexp.models.blocks import InputSpec

KINDS = ("mlm+nsp", "mlm", "clm", "cls-pooled", "cls-module", "cls-token", "qa")


@dataclass
class HeadParts:
    """What the heads block runs, found in the module tree."""

    kind: str
    """mlm+nsp (BERT pre-training), mlm, clm (next token), cls-pooled (classifier on the pooler's output),
    cls-module (a classification head that picks its token itself), cls-token (classifier on one token), qa (span
    start and end logits at every position, as SQuAD fine-tuning)."""
    head: nn.Module
    """The task head (``cls``, ``lm_head``, ``classifier``, ``score``)."""
    norms: List[nn.Module] = field(default_factory=list)
    """The backbone's final norms, applied to the hidden states first."""
    pooler: Any = None
    """The backbone's pooler (BERT), for kinds that use the pooled output."""
    dropout: Any = None
    """The task model's dropout before a classifier on the pooled output."""
    token: int = 0
    """Position a cls-token classifier reads: 0 (class token) or -1 (last token of a causal model)."""
    mask_tokens: int = 0
    """Positions the masked-LM head runs on."""


def head_for(task: str, model: nn.Module, children: Dict[str, nn.Module], tail: List[Tuple[str, nn.Module]],
             causal: bool, vision: bool, mask_tokens: int, what: str) -> HeadParts:
    """Find the task head among the task model's children (those beside the backbone)."""
    heads = {n: m for n, m in children.items() if any(True for _ in m.parameters())}
    if len(heads) != 1:
        found = ", ".join(f"{n} ({type(m).__name__})" for n, m in children.items()) or "none"
        raise ValueError(f"model.hf.config: {what} cannot be split: expected one head beside the backbone, found "
                         f"{found}; allowed: a backbone and one task head")
    head = next(iter(heads.values()))
    norms = [m for n, m in tail if "pool" not in n]
    pooler = next((m for n, m in tail if "pool" in n), None)
    dropout = children.get("dropout")
    cls_name = type(model).__name__
    if task == "pretraining":
        if hasattr(head, "predictions") and hasattr(head, "seq_relationship"):
            kind = "mlm+nsp"
        elif "MaskedLM" in cls_name:
            kind = "mlm"
        elif "CausalLM" in cls_name or "LMHead" in cls_name:
            kind = "clm"
        else:
            raise ValueError(f"model.hf.task: 'pretraining' is not allowed for {what}: its pre-training head "
                             f"{type(head).__name__} is not a language-model head; allowed: masked-lm | causal-lm "
                             "| classification")
    elif task in ("masked-lm", "causal-lm"):
        kind = "mlm" if task == "masked-lm" else "clm"
    elif task == "question-answering":
        kind = "qa"
    elif pooler is not None and isinstance(head, nn.Linear):
        kind = "cls-pooled"
    elif not isinstance(head, nn.Linear):
        kind = "cls-module"
    else:
        kind = "cls-token"
    if kind in ("mlm+nsp", "cls-pooled") and pooler is None:
        raise ValueError(f"model.hf.config: {what} cannot be split: its head needs a pooler and the backbone has "
                         "none after its layers; allowed: a backbone with a pooler for this task")
    return HeadParts(kind=kind, head=head, norms=norms, pooler=pooler, dropout=dropout,
                     token=-1 if causal and not vision else 0, mask_tokens=mask_tokens)


class Head(nn.Module):
    """The heads block: tail, task head and loss; returns ``(loss, logits)``."""

    def __init__(self, parts: HeadParts, context: Any, width: int = 0) -> None:
        super().__init__()
        self.width = width  # the tensors ahead of the labels: the layers' context and carried values
        self.kind, self.token, self.mask_tokens = parts.kind, parts.token, parts.mask_tokens
        self.norms = nn.ModuleList(parts.norms)
        self.pooler = parts.pooler
        self.dropout = parts.dropout if parts.kind == "cls-pooled" else None
        self.head = parts.head
        self.__dict__["_context"] = context

    def forward(self, hidden: torch.Tensor, *rest: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        labels = rest[self.width:]
        for norm in self.norms:
            hidden = norm(hidden)
        if self.kind == "mlm+nsp":
            mlm_logits, nsp_logits = self.head(hidden[:, : self.mask_tokens], self.pooler(hidden))
            loss = _ce(mlm_logits, labels[0]) + _ce(nsp_logits, labels[1])
            return loss, mlm_logits
        if self.kind == "qa":
            # Transformers' *ForQuestionAnswering: the mean of the start and end cross-entropies.
            logits = self.head(hidden)
            start, end = logits.unbind(-1)
            return (_ce(start, labels[0]) + _ce(end, labels[1])) / 2, logits
        if self.kind == "mlm":
            logits = self.head(hidden[:, : self.mask_tokens])
        elif self.kind == "clm":
            # labels are the inputs shifted by one token (the data pipeline shifts them, as for ipuexp's GPT-2)
            logits = self.head(hidden)
        elif self.kind == "cls-pooled":
            pooled = self.pooler(hidden)
            logits = self.head(self.dropout(pooled) if self.dropout is not None else pooled)
        elif self.kind == "cls-module":
            logits = self.head(hidden)
        else:
            logits = self.head(hidden[:, self.token])
        return _ce(logits, labels[0]), logits

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, mask_tokens={self.mask_tokens}"


def _ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, -2), labels.flatten().long())


def label_specs(kind: str, seq: int, mask_tokens: int, config: Dict[str, Any]) -> List[InputSpec]:
    """The labels each kind of head takes (they follow the inputs)."""
    vocab = int(config.get("vocab_size") or 2)
    if kind == "mlm+nsp":
        return [InputSpec("mlm_labels", (mask_tokens,), "int32", is_label=True, high=vocab),
                InputSpec("nsp_labels", (), "int32", is_label=True, high=2)]
    if kind == "mlm":
        return [InputSpec("labels", (mask_tokens,), "int32", is_label=True, high=vocab)]
    if kind == "clm":
        return [InputSpec("labels", (seq,), "int32", is_label=True, high=vocab)]
    if kind == "qa":
        return [InputSpec("start_positions", (), "int32", is_label=True, high=seq),
                InputSpec("end_positions", (), "int32", is_label=True, high=seq)]
    labels = int(config.get("num_labels") or len(config.get("id2label") or {}) or 2)
    return [InputSpec("labels", (), "int32", is_label=True, high=labels)]
