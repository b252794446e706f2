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

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import _disable_current_modes

from ipuexp.models.blocks import InputSpec
from ipuexp.models.hf_chain import one_sequence_per_sample

if TYPE_CHECKING:
    from transformers import PretrainedConfig


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


class StandIn(nn.Module):
    """Stands for a layer list during a replay: returns what the list's last layer returned (``value``: a tensor,
    or None to pass its input on), shaped as the layers' outputs (``arity`` values, ``carried`` ones at their
    indices), and turns recording back on when ``recording`` is given."""

    def __init__(self, arity: int, value: Any = None, carried: Optional[Dict[int, Any]] = None,
                 recording: Optional[_Recording] = None) -> None:
        super().__init__()
        self.arity = arity
        self.__dict__.update(_value=value, _carried=dict(carried or {}), _recording=recording)

    def forward(self, hidden: Any = None, *args: Any, **kwargs: Any) -> Any:
        if hidden is None:
            hidden = kwargs.get("hidden_states")
        if self._value is not None:
            hidden = self._value
        if self._recording is not None:
            self._recording.on()
        if self.arity == 0:
            return hidden
        out = [hidden, *([None] * (self.arity - 1))]
        for index, value in self._carried.items():
            if index < self.arity:
                out[index] = value
        return tuple(out)


@contextmanager
def standing_aside(lists: List[Tuple[nn.Module, str, int]], stand_ins: List[nn.Module],
                   recording: _Recording) -> Iterator[None]:
    """The layer lists replaced by ``stand_ins`` (a probe may be among them), recording off until a stand-in turns
    it on; everything restored after."""
    saved = [(parent, name, parent._modules[name]) for parent, name, _ in lists]
    for (parent, name, _), stand_in in zip(lists, stand_ins):
        parent._modules[name] = nn.ModuleList([stand_in])
    recording.off()
    try:
        with one_sequence_per_sample():
            yield
    finally:
        recording.on()
        for parent, name, module in saved:
            parent._modules[name] = module


class TaskHead(nn.Module):
    """Heads block: the task model's own tail, head and loss; returns ``(loss, logits)``.

    ``lists`` are the model's layer lists in the order its forward runs them, each with the arity of its layers'
    outputs (0 for a bare tensor); ``inputs`` the model's inputs (shapes only: the stand-ins ignore them);
    ``width`` the tensors of the last list's context and carried values; ``saved`` how many outputs of earlier
    lists follow them (a stack of several lists); ``carry`` the last list's carried values' output indices."""

    def __init__(self, model: nn.Module, lists: List[Tuple[nn.Module, str, int]], inputs: List[InputSpec],
                 labels: List[str], width: int, kind: str, extra: Optional[Dict[str, Any]] = None,
                 positions: int = 0, saved: int = 0, carry: Optional[List[int]] = None) -> None:
        super().__init__()
        # positions: a masked-LM head runs on the first ``positions`` tokens only (the masked ones, which the data
        # pipeline moves to the front), as ipuexp's BERT and Optimum's OnehotGather of max_num_masked_tokens do
        self.kind, self.width, self.positions, self.saved = kind, width, positions, saved
        self.input_specs, self.label_names = list(inputs), list(labels)
        self.__dict__.update(_model=model, _lists=lists, _extra=dict(extra or {}), _carry=list(carry or []))
        # what this block owns: the task model's modules outside the backbone (head, projector, ...); modules
        # shared with earlier blocks are theirs (ownership goes to the first block holding a parameter)
        self.model_parts = nn.ModuleList([m for m in model.children()])

    def forward(self, hidden: torch.Tensor, *rest: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        labels = dict(zip(self.label_names, rest[len(rest) - len(self.label_names):]))
        carried_values = rest[self.width - len(self._carry):self.width]
        earlier = rest[self.width:self.width + self.saved]
        recording = _Recording()
        last = len(self._lists) - 1
        stand_ins = [StandIn(arity, (earlier[i] if i < len(earlier) else None) if i < last else (hidden[:, : self.positions] if self.positions
                                                                 else hidden),
                             dict(zip(self._carry, carried_values)) if i == last else None,
                             recording if i == last else None)
                     for i, (_p, _n, arity) in enumerate(self._lists)]
        with standing_aside(self._lists, stand_ins, recording):
            inputs = {s.name: _shaped(s, hidden) for s in self.input_specs}
            out = self._model(**inputs, **self._extra, **({} if self.kind == "ctc" else labels), return_dict=True)
        logits = out.get("logits")
        if logits is None:  # a task output that names its scores otherwise (LXMERT's question_answering_score)
            logits = next(v for k, v in out.items() if k != "loss" and isinstance(v, torch.Tensor))
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


def ctc_loss(config: "PretrainedConfig", logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
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
