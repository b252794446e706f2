"""What a model is, as the configuration describes it: the ``model`` node of an experiment.

The models layer owns this description (it builds models from it); the experiment schema (``ipuexp.config.schema``)
composes it. A function here takes either shape of it: the composed node Hydra hands a job (a ``DictConfig``) or the
dataclass it converts to.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Union

from omegaconf import DictConfig


@dataclass
class HFModelConfig:
    """A Transformers model built from its ``config.json`` on meta tensors (``model.name=hf``, extra ``.[hf]``)."""

    config: Optional[str] = None
    """A config.json file or a folder holding one, a model id in the local Hugging Face cache, or a shipped
    configuration (bert-base-uncased, bert-large-uncased, roberta-large, gpt2-medium, gpt2-large,
    vit-base-patch16-224, TinyLlama-1.1B-Chat-v1.0). Nothing is downloaded."""
    task: str = "pretraining"
    """pretraining (the architecture's objective: BERT masked LM + next sentence, RoBERTa masked LM, GPT-2 and
    Llama causal LM), masked-lm, causal-lm, classification (sequence or image), question-answering (SQuAD-style
    span start and end), seq2seq-lm (an encoder-decoder's next token), token-classification, audio-classification,
    ctc (speech recognition) or image-classification."""
    target_length: int = 128
    """Tokens of an encoder-decoder's decoder input (summary, translation or transcript), per sample."""
    config_overrides: Dict[str, Any] = field(default_factory=dict)
    """Attributes set on the configuration after reading it, e.g. ``{attention_probs_dropout_prob: 0.0}`` (as the
    ``--config_overrides`` of Transformers' training scripts)."""
    ipu_config: Optional[str] = None
    """An Optimum Graphcore ``ipu_config.json`` whose IPU options apply to the run: they override the recipe's; the
    command line overrides both."""
    optimum_graphcore: Optional[str] = None
    """The Optimum Graphcore release the ``ipu_config.json`` runs under (0.1.0 to 0.7.1), whose ``IPUConfig``
    defaults fill the fields the file leaves out; null: the first release's, naming the fields a later release
    changed (half partials from 0.4.3, matmul proportion 0.2 from 0.6.0, optimizer state on chip from 0.6.1)."""


@dataclass
class ModelConfig:
    """A model: a zoo name or a Hydra ``_target_`` for the user's own ``ipuexp.PipelinedModel`` factory."""

    name: str = "bert"
    """Zoo model family (bert, gpt2, vit, resnet50, mnist_cnn), ``hf`` (a Transformers model, see ``hf``) or
    ``custom`` with ``target``."""
    size: str = "large"
    """Zoo variant (e.g. large, base, medium, b16, 50, tutorial)."""
    sequence_length: int = 128
    """Tokens per sample (transformer text models)."""
    image_size: int = 224
    """Image height and width (vision models)."""
    num_layers: Optional[int] = None
    """Override the variant's layer count."""
    num_classes: Optional[int] = None
    """Override the variant's class count."""
    vocab_size: Optional[int] = None
    """Override the variant's vocabulary size."""
    mask_tokens: Optional[int] = None
    """Positions per sequence the masked-LM head runs on (BERT pre-training); null: Graphcore's published value for
    the sequence length (20 at 128, 56 at 384, 76 at 512), else 15% of it."""
    sequences_per_pack: int = 1
    """Sequences one row of the model's input holds at most (packed BERT): the primary config sets it from
    ``data.packing.max_sequences_per_pack``."""
    split_layers: bool = False
    """Each encoder layer as two pipeline blocks, attention then feed-forward (zoo BERT), so that a stage can end
    between them: the primary config sets it from ``options.pipeline.split_layers``."""
    target: Optional[str] = None
    """Dotted path of a callable returning an ``ipuexp.PipelinedModel`` (name=custom)."""
    hf: HFModelConfig = field(default_factory=HFModelConfig)
    """The Transformers model (name=hf); ``num_layers``, ``vocab_size``, ``num_classes``, ``sequence_length`` and
    ``image_size`` apply to it too."""


def model_label(model: ModelNode) -> str:
    """A model's short name for titles and tracking: ``bert_large``, or ``hf:bert-large-uncased`` for a
    Transformers model (its model id, or the name of its ``config.json``'s file or folder)."""
    def get(node: Any, key: str) -> Any:
        return node.get(key) if isinstance(node, Mapping) else getattr(node, key, None)

    if get(model, "name") == "custom":  # the user's module names it: examples.mlp_classifier:build -> custom:mlp_classifier
        target = str(get(model, "target") or "?").replace(":", ".")
        module = target.rpartition(".")[0] or target
        return f"custom:{module.rpartition('.')[2]}"
    if get(model, "name") != "hf":
        return f"{get(model, 'name')}_{get(model, 'size')}"
    parts = [p for p in str(get(get(model, "hf"), "config") or "?").split("/") if p]
    if parts and parts[-1] == "config.json" and len(parts) > 1:
        parts.pop()  # a folder's config.json: the folder names the model
    name = parts[-1] if parts else "?"
    return f"hf:{name[:-len('.json')] if name.endswith('.json') else name}"


ModelNode = Union[DictConfig, ModelConfig]
"""A ``model`` node: composed (``DictConfig``) or converted (``ModelConfig``)."""
