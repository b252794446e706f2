"""What a Transformers model is fed, found from its task class: the main input Transformers names for it
(``input_ids``, ``pixel_values``, ``input_values`` for raw audio, ``input_features`` for log-mel frames), the
companions Graphcore's examples feed beside it, and the labels of each task."""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, List, Tuple

import torch
from torch import nn

from ipuexp.models.blocks import InputSpec
from ipuexp.models.hf_source import HFSource
from ipuexp.models.spec import ModelNode

if TYPE_CHECKING:
    from transformers import PretrainedConfig


def input_specs(source: HFSource, model: nn.Module, stack: nn.Module, causal: bool, seq: int,
                model_cfg: ModelNode) -> List[InputSpec]:
    """Inputs as Graphcore's examples feed them: token ids (+ token types and padding mask for encoders, as its
    BERT), token ids alone for causal models (as its GPT-2), images for vision models, ``model.sequence_length``
    audio samples (16,000 a second) or log-mel frames for speech; LXMERT-style models also take
    ``model.hf.num_visual_features`` region features and boxes."""
    cfg = source.config
    main = getattr(model, "main_input_name", "input_ids")
    if main == "pixel_values" or source.is_vision:
        size = int(cfg["image_size"])
        return [InputSpec("pixel_values", (int(cfg.get("num_channels", 3)), size, size), "float32")]
    if main == "input_values":
        return [InputSpec("input_values", (seq,), "float32")]
    if main == "input_features":
        return [InputSpec("input_features", (int(cfg["num_mel_bins"]), seq), "float32")]
    params = inspect.signature(stack.forward).parameters
    specs = [InputSpec("input_ids", (seq,), "int32", high=int(stack.config.vocab_size))]
    type_vocab = int(getattr(stack.config, "type_vocab_size", 0) or 0)
    if "token_type_ids" in params and type_vocab > 1:
        specs.append(InputSpec("token_type_ids", (seq,), "int32", high=type_vocab))
    if not causal and "attention_mask" in params:
        specs.append(InputSpec("attention_mask", (seq,), "int32", high=2))
    boxes = int(getattr(getattr(model_cfg, "hf", None), "num_visual_features", 36) or 36)
    for name in params:  # region features and their boxes (visual_feats [boxes, 2048], visual_pos [boxes, 4])
        if name.endswith("_feats") and isinstance(cfg.get(f"{name[:-6]}_feat_dim"), int):
            specs.append(InputSpec(name, (boxes, int(cfg[f"{name[:-6]}_feat_dim"])), "float32"))
        elif name.endswith("_pos") and isinstance(cfg.get(f"{name}_dim"), int):
            specs.append(InputSpec(name, (boxes, int(cfg[f"{name}_dim"])), "float32"))
    return specs


def _num_labels(config: "PretrainedConfig") -> int:
    return int(getattr(config, "num_labels", 0) or 2)


def task_labels(task: str, model: nn.Module, hidden: torch.Tensor, seq: int, mask_tokens: int,
                target: int = 0) -> Tuple[str, List[InputSpec]]:
    """(kind, labels) of a task whose loss Transformers' task class computes. ``hidden`` is the last stack's
    hidden states (its positions count frames for CTC); ``target`` the decoder's or transcript's tokens."""
    config = model.config
    vocab = int(getattr(config, "vocab_size", 0) or 2)
    if task == "seq2seq-lm" or (task == "pretraining" and getattr(config, "is_encoder_decoder", False)):
        return "seq2seq", [InputSpec("labels", (target,), "int32", is_label=True, high=vocab)]
    if task == "ctc":
        frames = int(hidden.shape[1])
        if not 1 <= target <= frames:
            raise ValueError(f"model.hf.target_length: {target} is not allowed; allowed: 1 to {frames}, the frames "
                             f"that model.sequence_length={seq} audio samples give (CTC aligns each label to a frame)")
        return "ctc", [InputSpec("labels", (target,), "int32", is_label=True, high=vocab)]
    if task == "token-classification":
        return "token", [InputSpec("labels", (seq,), "int32", is_label=True, high=_num_labels(config))]
    if task in ("masked-lm", "pretraining") and "MaskedLM" in type(model).__name__:
        return "mlm", [InputSpec("labels", (mask_tokens,), "int32", is_label=True, high=vocab)]
    if task == "causal-lm":
        return "clm", [InputSpec("labels", (seq,), "int32", is_label=True, high=vocab)]
    if task == "question-answering" and "start_positions" not in inspect.signature(model.forward).parameters:
        # answer classification over a fixed answer set (LXMERT's VQA and GQA heads)
        answers = int(getattr(config, "num_qa_labels", 0) or _num_labels(config))
        return "cls", [InputSpec("labels", (), "int32", is_label=True, high=answers)]
    if task == "question-answering":
        return "qa", [InputSpec("start_positions", (), "int32", is_label=True, high=seq),
                      InputSpec("end_positions", (), "int32", is_label=True, high=seq)]
    if task in ("classification", "audio-classification", "image-classification"):
        return "cls", [InputSpec("labels", (), "int32", is_label=True, high=_num_labels(config))]
    raise ValueError(f"model.hf.task: {task!r} is not allowed for {type(model).__name__}: its head is not one "
                     "ipuexp can split off; allowed: a task whose head follows the backbone's layers")
