"""The heads block of the tasks whose head and loss are Transformers' own task class's: the task model's forward,
run from the last layer on.

The task model's ``forward`` runs whole, with every layer list standing aside (a list of one stand-in). Until the
last list's stand-in is reached, the dispatch modes that record the block (its op recorder, a flop counter) are
off and gradients are not kept: what the model computes before its layers (embeddings, masks) is other blocks'
work and leaves nothing behind. The stand-in hands over the block's hidden states and turns recording back on, so
the backbone's tail (final norms, pooling), the task head and the loss are recorded exactly as Transformers
computes them: a ConvNeXt's pooled layer norm, a speech classifier's projector and mean over time, a seq2seq
model's scaled and tied LM head with its logit bias.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import _disable_current_modes

from ipuexp.models.blocks import InputSpec
from ipuexp.models.hf_chain import one_sequence_per_sample


class _Recording:
    """Turns the block's dispatch modes and gradients off, then back on once."""

    def __init__(self) -> None:
        self._modes: Any = None
        self._grad = True

    def off(self) -> None:
        self._grad = torch.is_grad_enabled()
        self._modes = _disable_current_modes()
        self._modes.__enter__()
        torch.set_grad_enabled(False)

    def on(self) -> None:
        if self._modes is not None:
            modes, self._modes = self._modes, None
            modes.__exit__(None, None, None)
            torch.set_grad_enabled(self._grad)


class _StandIn(nn.Module):
    """Stands for a layer list: hands over the block's hidden states (the last list) or passes its input on."""

    def __init__(self, arity: int, head: "TaskHead", last: bool) -> None:
        super().__init__()
        self.arity, self.last = arity, last
        self.__dict__["_head"] = head

    def forward(self, hidden: Any = None, *args: Any, **kwargs: Any) -> Any:
        if hidden is None:
            hidden = kwargs.get("hidden_states")
        if self.last:
            hidden = self._head._hidden
            self._head._recording.on()
        return hidden if self.arity == 0 else (hidden, *([None] * (self.arity - 1)))


class TaskHead(nn.Module):
    """Heads block: the task model's own tail, head and loss; returns ``(loss, logits)``.

    ``lists`` are the model's layer lists in the order its forward runs them, each with the arity of its layers'
    outputs (0 for a bare tensor); ``inputs`` the model's inputs (shapes only: the stand-ins ignore them);
    ``width`` the tensors ahead of the labels in the block's inputs."""

    def __init__(self, model: nn.Module, lists: List[Tuple[nn.Module, str, int]], inputs: List[InputSpec],
                 labels: List[str], width: int, kind: str, extra: Optional[Dict[str, Any]] = None,
                 positions: int = 0) -> None:
        super().__init__()
        # positions: a masked-LM head runs on the first ``positions`` tokens only (the masked ones, which the data
        # pipeline moves to the front), as ipuexp's BERT and Optimum's OnehotGather of max_num_masked_tokens do
        self.kind, self.width, self.positions = kind, width, positions
        self.input_specs, self.label_names = list(inputs), list(labels)
        self.__dict__.update(_model=model, _lists=lists, _extra=dict(extra or {}), _hidden=None,
                             _recording=_Recording())
        # what this block owns: the task model's modules outside the backbone (head, projector, ...); modules
        # shared with earlier blocks are theirs (ownership goes to the first block holding a parameter)
        self.model_parts = nn.ModuleList([m for m in model.children()])

    def forward(self, hidden: torch.Tensor, *rest: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        labels = dict(zip(self.label_names, rest[self.width:]))
        saved = [(parent, name, parent._modules[name]) for parent, name, _ in self._lists]
        for i, (parent, name, arity) in enumerate(self._lists):
            parent._modules[name] = nn.ModuleList([_StandIn(arity, self, i == len(self._lists) - 1)])
        self.__dict__["_hidden"] = hidden[:, : self.positions] if self.positions else hidden
        self._recording.off()
        try:
            inputs = {s.name: _shaped(s, hidden) for s in self.input_specs}
            with one_sequence_per_sample():
                out = self._model(**inputs, **self._extra, **({} if self.kind == "ctc" else labels), return_dict=True)
        finally:
            self._recording.on()
            self.__dict__["_hidden"] = None
            for parent, name, module in saved:
                parent._modules[name] = module
        logits = out.logits
        if self.kind == "ctc":
            return ctc_loss(self._model.config, logits, labels["labels"]), logits
        return out.loss, logits

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}"


def _shaped(spec: InputSpec, like: torch.Tensor) -> torch.Tensor:
    """An input of the spec's shape for the stand-in run: masks all ones, ids zero (only shapes are read)."""
    shape = (like.shape[0], *spec.shape)
    fill = 1 if spec.name.endswith("attention_mask") else 0
    return torch.full(shape, fill, dtype=getattr(torch, spec.dtype), device=like.device)


def ctc_loss(config: Any, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Transformers' CTC loss for *ForCTC (log-softmax in fp32, blank = the pad token, the configured reduction),
    with every frame and every label position valid: a padded batch of equal lengths, as the IPU runs it."""
    _register_ctc_meta()
    log_probs = F.log_softmax(logits, dim=-1, dtype=torch.float32).transpose(0, 1)
    frames, batch = int(log_probs.shape[0]), int(log_probs.shape[1])
    input_lengths, target_lengths = (frames,) * batch, (int(labels.shape[-1]),) * batch
    with torch.backends.cudnn.flags(enabled=False):
        return F.ctc_loss(log_probs, labels.long(), input_lengths, target_lengths, blank=config.pad_token_id,
                          reduction=config.ctc_loss_reduction, zero_infinity=config.ctc_zero_infinity)


_CTC_META: List[Any] = []


def _register_ctc_meta() -> None:
    """Shapes of CTC's forward and backward on meta tensors, which PyTorch has no kernel for: the per-sample loss
    [B] and the alignment table [B, T, 2S + 1] that its forward keeps for the backward; the gradient is the log
    probabilities' shape."""
    if _CTC_META:
        return

    def forward(log_probs: torch.Tensor, targets: torch.Tensor, input_lengths: Any, target_lengths: Any,
                blank: int = 0, zero_infinity: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
        frames, batch = log_probs.shape[0], log_probs.shape[1]
        return (log_probs.new_empty((batch,)), log_probs.new_empty((batch, frames, 2 * targets.shape[-1] + 1)))

    def backward(grad: torch.Tensor, log_probs: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return torch.empty_like(log_probs)

    lib = torch.library.Library("aten", "IMPL")
    for name in ("_ctc_loss", "_ctc_loss.Tensor"):
        lib.impl(name, forward, "Meta")
    for name in ("_ctc_loss_backward", "_ctc_loss_backward.Tensor"):
        lib.impl(name, backward, "Meta")
    _CTC_META.append(lib)
