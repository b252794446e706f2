"""Transformers models as chains of :class:`ipuexp.Block`: built from a ``config.json`` on torch's current device
(the meta device for a capture: no weights), split into an embeddings block, one block per layer and a heads block.

The split is found in the module tree, not written per architecture: the backbone's layers are its longest list of
identical modules; running the backbone's own ``forward`` with that list replaced by a probe yields what its loop
hands each layer (hidden states, attention mask, rotary position embeddings, ...), which the embeddings block
returns and each layer block passes on. Modules the probe did not run are the backbone's tail (a final norm, a
pooler), which join the task head and its loss in the heads block. Attention runs the model's own eager attention
(scores as real tensors, as on the IPU), with the attention mask kept broadcastable ([B, 1, 1, S] for padding,
[1, 1, S, S] for causal) as Graphcore's BERT builds it, and dropout as one op with a 1-byte mask.
"""
from __future__ import annotations

import inspect
from typing import Any, Dict, List, Tuple

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_unflatten

from ipuexp.models.blocks import Block, InputSpec, PipelinedModel
from ipuexp.models.hf_attention import ATTENTION, register
from ipuexp.models.hf_heads import Head, head_for, label_specs
from ipuexp.models.hf_source import HFSource, resolve
from ipuexp.models.spec import ModelNode
from ipuexp.models.transformer import Dropout

_AUTO = {"pretraining": "AutoModelForPreTraining", "masked-lm": "AutoModelForMaskedLM",
         "causal-lm": "AutoModelForCausalLM", "classification": "AutoModelForSequenceClassification",
         "question-answering": "AutoModelForQuestionAnswering"}
_MAPPINGS = {"AutoModelForPreTraining": "MODEL_FOR_PRETRAINING_MAPPING_NAMES",
             "AutoModelForMaskedLM": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
             "AutoModelForCausalLM": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
             "AutoModelForSequenceClassification": "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
             "AutoModelForImageClassification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
             "AutoModelForQuestionAnswering": "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES"}


class _Stop(Exception):
    """Raised by the probe standing in for the layers: carries what the backbone passes its first layer."""


class _Probe(nn.Module):
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise _Stop(args, kwargs)


class _Context:
    """What the backbone's loop passes each layer besides the hidden states, as a flat list of tensors plus the
    structure and constants to rebuild the call (shared by the embeddings block and the layer blocks)."""

    def __init__(self) -> None:
        self.spec: Any = None
        self.leaves: List[Any] = []
        self.tensor_at: List[int] = []

    def flatten(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[torch.Tensor, ...]:
        leaves, spec = tree_flatten((args, kwargs))
        if self.spec is None:
            self.spec, self.leaves = spec, leaves
            self.tensor_at = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
        return tuple(leaves[i] for i in self.tensor_at)

    def rebuild(self, tensors: Tuple[Any, ...]) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
        leaves = list(self.leaves)
        for i, t in zip(self.tensor_at, tensors, strict=True):
            leaves[i] = t
        return tree_unflatten(leaves, self.spec)


class Embeddings(nn.Module):
    """The backbone up to its first layer: its own forward, stopped by a probe in place of the layers."""

    def __init__(self, backbone: nn.Module, parts: List[nn.Module], layers: Tuple[nn.Module, str],
                 input_names: List[str], call_kwargs: Dict[str, Any], context: _Context) -> None:
        super().__init__()
        self.parts = nn.ModuleList(parts)  # what this block owns (the backbone is shared with other blocks)
        self.__dict__["_backbone"], self.__dict__["_layers"], self.__dict__["_context"] = backbone, layers, context
        self.input_names = list(input_names)
        self.__dict__["_call_kwargs"] = dict(call_kwargs)

    def train(self, mode: bool = True) -> "Embeddings":
        self._backbone.training = mode
        return super().train(mode)

    def forward(self, *inputs: Any) -> Tuple[Any, ...]:
        n = len(self.input_names)
        hidden, args, kwargs = probe(self._backbone, self._layers,
                                     {**dict(zip(self.input_names, inputs[:n])), **self._call_kwargs})
        return (hidden, *self._context.flatten(args, kwargs), *inputs[n:])


class Layer(nn.Module):
    """One layer of the backbone, called as its loop calls it."""

    def __init__(self, layer: nn.Module, context: _Context) -> None:
        super().__init__()
        self.layer = layer
        self.__dict__["_context"] = context

    def forward(self, hidden: torch.Tensor, *rest: Any) -> Tuple[Any, ...]:
        n = len(self._context.tensor_at)
        args, kwargs = self._context.rebuild(rest[:n])
        out = self.layer(hidden, *args, **kwargs)
        return (out[0] if isinstance(out, tuple) else out, *rest)


def probe(backbone: nn.Module, layers: Tuple[nn.Module, str], inputs: Dict[str, Any]) -> Tuple[Any, ...]:
    """Run ``backbone`` with its layer list replaced by a probe; return (hidden states, args, kwargs) of the
    first layer's call. Packed-sequence detection, which reads the position ids' values, is off: the inputs are
    one sequence per sample."""
    import transformers.masking_utils as masking

    parent, name = layers
    saved, find_packed = getattr(parent, name), masking.find_packed_sequence_indices
    parent._modules[name] = nn.ModuleList([_Probe()])
    masking.find_packed_sequence_indices = lambda *a, **k: None
    try:
        backbone(**inputs)
    except _Stop as stop:
        args, kwargs = stop.args
    else:
        raise ValueError(f"model.hf.config: {type(backbone).__name__} returned without calling its layers "
                         f"({name}); allowed: a backbone that loops over its layer list")
    finally:
        parent._modules[name] = saved
        masking.find_packed_sequence_indices = find_packed
    args, kwargs = list(args), dict(kwargs)
    hidden = args.pop(0) if args else kwargs.pop("hidden_states")
    return hidden, tuple(args), kwargs


def _layer_list(backbone: nn.Module, what: str) -> Tuple[nn.Module, str, nn.ModuleList]:
    """The longest ModuleList of modules of one class: the repeated layers."""
    best = None
    for path, module in backbone.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) and len({type(m) for m in module}) == 1:
            if best is None or len(module) > len(best[1]):
                best = (path, module)
    if best is None:
        children = ", ".join(f"{n} ({type(m).__name__})" for n, m in backbone.named_children())
        raise ValueError(f"model.hf.config: {what} cannot be split: {type(backbone).__name__} holds no list of "
                         f"repeated layers (found {children}); allowed: a model whose layers are a ModuleList")
    path, module = best
    parent_path, _, name = path.rpartition(".")
    return backbone.get_submodule(parent_path) if parent_path else backbone, name, module


def _swap_dropout(model: nn.Module) -> None:
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Dropout:
                module._modules[name] = Dropout(child.p)


SUPPORTED_EXAMPLES = ("bert", "roberta", "gpt2", "vit", "llama")
"""Model types of the shipped configurations (``models/hf_configs``), named when a config.json's type is unknown."""


def _transformers_model(source: HFSource, task: str) -> nn.Module:
    import transformers
    from transformers import AutoConfig
    from transformers.models.auto import modeling_auto

    register()
    from transformers import CONFIG_MAPPING

    model_type = source.config.get("model_type")
    if model_type not in CONFIG_MAPPING:
        known = list(CONFIG_MAPPING.keys())
        raise ValueError(f"model.hf.config: {source.label!r}: its model_type {model_type!r} is unknown to "
                         f"Transformers {transformers.__version__}; allowed: a config.json whose model_type is one of "
                         f"its {len(known)} types, such as {', '.join(SUPPORTED_EXAMPLES)} (the full list: "
                         "python -c 'import transformers; print(sorted(transformers.CONFIG_MAPPING))')") from None
    try:
        config = AutoConfig.for_model(**source.config)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"model.hf.config: {source.label!r} cannot be read by Transformers "
                         f"{transformers.__version__} ({str(exc).splitlines()[0].split('. Should contain')[0][:160]}); allowed: a config.json of a "
                         "model type Transformers knows") from None
    layer_types = set(getattr(config, "layer_types", None) or ())
    if len(layer_types) > 1:
        raise ValueError(f"model.hf.config: {source.label!r} mixes attention layer types {sorted(layer_types)}; "
                         "allowed: models whose layers share one attention pattern")
    auto = _AUTO[task]
    if task == "classification" and source.is_vision:
        auto = "AutoModelForImageClassification"
    if source.model_type not in getattr(modeling_auto, _MAPPINGS[auto]):
        tasks = [t for t, a in _AUTO.items() if source.model_type in getattr(modeling_auto, _MAPPINGS[a])]
        if source.model_type in modeling_auto.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES:
            tasks.append("classification")
        raise ValueError(f"model.hf.task: {task!r} is not allowed; allowed: {' | '.join(sorted(set(tasks))) or 'none'} "
                         f"for {source.label} (model_type {source.model_type}: Transformers has no {auto} for it)")
    return getattr(transformers, auto).from_config(config, attn_implementation=ATTENTION, dtype=torch.float32)


def build_hf(model_cfg: ModelNode) -> PipelinedModel:
    """The Transformers model of ``model_cfg`` (``name=hf``) as a PipelinedModel; no weights on the meta device."""
    from ipuexp.models.bert import mask_tokens_for

    source = resolve(model_cfg)
    task = str(model_cfg.hf.task)
    model = _transformers_model(source, task)
    _swap_dropout(model)
    model.train()
    backbone = model.base_model
    what = f"{source.label} ({type(model).__name__})"
    parent, name, layers = _layer_list(backbone, what)
    causal = any(getattr(m, "is_causal", False) is True for m in layers[0].modules())
    seq = int(getattr(model_cfg, "sequence_length", 128))
    mask_tokens = int(getattr(model_cfg, "mask_tokens", None) or mask_tokens_for(seq))
    if not 1 <= mask_tokens <= seq:
        raise ValueError(f"model.mask_tokens={mask_tokens} is invalid: allowed: 1 to model.sequence_length ({seq})")
    inputs = _input_specs(source, backbone, causal, seq)
    call_kwargs = {"use_cache": False} if "use_cache" in inspect.signature(backbone.forward).parameters else {}

    # Which backbone modules run before the layers: everything else (but the layers) is its tail.
    ran: set = set()
    hooks = [m.register_forward_pre_hook(lambda mod, _a: ran.add(id(mod))) for m in backbone.modules()]
    try:
        example = {s.name: torch.zeros((1, *s.shape), dtype=getattr(torch, s.dtype)) for s in inputs}
        probe(backbone, (parent, name), {**example, **call_kwargs})
    except ValueError:
        raise
    except Exception as exc:  # the backbone's own code failed on meta tensors: one line, the cause chained
        raise ValueError(f"model.hf.config: {what} cannot be split: running its backbone up to the first layer "
                         f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:200]}; allowed: a backbone "
                         "that runs on meta tensors") from exc
    finally:
        for h in hooks:
            h.remove()
    before, tail = _split_backbone(backbone, layers, ran, what)
    head_children = {n: m for n, m in model.named_children() if m is not backbone}
    head = head_for(task, model, head_children, tail, causal, source.is_vision, mask_tokens, what)

    context = _Context()
    blocks = [Block("embeddings", Embeddings(backbone, before, (parent, name), [s.name for s in inputs],
                                             call_kwargs, context))]
    blocks += [Block(f"layer{i}", Layer(layer, context), is_layer=True) for i, layer in enumerate(layers)]
    blocks.append(Block("heads", Head(head, context)))
    sizes = {"vocab_size": getattr(model.config, "vocab_size", None), "num_labels": model.config.num_labels}
    specs = inputs + label_specs(head.kind, seq, mask_tokens, sizes)
    hparams = {"hf_config": source.label, "hf_task": task, "model_type": source.model_type,
               "layers": len(layers), "transformers_class": type(model).__name__}
    if head.kind in ("mlm", "mlm+nsp"):
        hparams["mask_tokens"] = mask_tokens
    pipelined = PipelinedModel(blocks, name=f"hf:{source.label}", input_spec=specs, hparams=hparams)
    pipelined.__dict__["transformers_model"] = model  # the Transformers model whose modules the blocks hold
    return pipelined


def _split_backbone(backbone: nn.Module, layers: nn.ModuleList, ran: set, what: str
                    ) -> Tuple[List[nn.Module], List[Tuple[str, nn.Module]]]:
    """Backbone modules outside the layers: those the probe ran (embeddings) and the tail (norms, pooler)."""
    before: List[nn.Module] = []
    tail: List[Tuple[str, nn.Module]] = []

    def visit(module: nn.Module, prefix: str) -> None:
        for name, child in module.named_children():
            if child is layers:
                continue
            if any(m is layers for m in child.modules()):
                visit(child, f"{prefix}{name}.")
            elif id(child) in ran:
                before.append(child)
            elif any(True for _ in child.parameters()):
                tail.append((f"{prefix}{name}", child))

    visit(backbone, "")
    for name, module in tail:
        if "pool" not in name and "norm" not in type(module).__name__.lower():
            raise ValueError(f"model.hf.config: {what} cannot be split: {name} ({type(module).__name__}) follows "
                             "the layers and is neither a norm nor a pooler; allowed: embeddings, a list of "
                             "layers, then a final norm and/or a pooler")
    return before, tail


def _input_specs(source: HFSource, backbone: nn.Module, causal: bool, seq: int) -> List[InputSpec]:
    """Inputs as Graphcore's examples feed them: token ids (+ token types and padding mask for encoders, as its
    BERT), token ids alone for causal models (as its GPT-2), images for vision models."""
    cfg = source.config
    if source.is_vision:
        size = int(cfg["image_size"])
        return [InputSpec("pixel_values", (int(cfg.get("num_channels", 3)), size, size), "float32")]
    params = inspect.signature(backbone.forward).parameters
    specs = [InputSpec("input_ids", (seq,), "int32", high=int(backbone.config.vocab_size))]
    type_vocab = int(getattr(backbone.config, "type_vocab_size", 0) or 0)
    if "token_type_ids" in params and type_vocab > 1:
        specs.append(InputSpec("token_type_ids", (seq,), "int32", high=type_vocab))
    if not causal and "attention_mask" in params:
        specs.append(InputSpec("attention_mask", (seq,), "int32", high=2))
    return specs
