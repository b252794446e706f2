"""Transformers models as chains of :class:`ipuexp.Block`: built from a ``config.json`` on torch's current device
(the meta device for a capture: no weights), split into an embeddings block, one block per layer and a heads block.

The split is found in the module tree, not written per architecture: a stack's layers are its longest list of
identical modules; running the stack's own ``forward`` with that list replaced by a probe yields what its loop
hands each layer (hidden states, attention mask, rotary position embeddings, ...), which the embeddings block
returns and each layer block passes on (``hf_chain``). A list of identical stages, each holding such a list
(ConvNeXt), is one chain of layers with each stage's entry (its downsampling) as a block of its own between them.
An encoder-decoder is two stacks in one chain (``hf_seq2seq``). Modules the probe did not run are the backbone's
tail (a final norm, a pooler), which join the task head and its loss in the heads block. Attention runs the
model's own eager attention (scores as real tensors, as on the IPU), with the attention mask kept broadcastable
([B, 1, 1, S] for padding, [1, 1, S, S] for causal) as Graphcore's BERT builds it, and dropout as one op with a
1-byte mask.
"""
from __future__ import annotations

import inspect
from typing import Any, Dict, List, Tuple

import torch
from torch import nn

from ipuexp.models.blocks import Block, PipelinedModel
from ipuexp.models.hf_attention import register
from ipuexp.models.hf_build import SUPPORTED_EXAMPLES, task_model  # noqa: F401
from ipuexp.models.hf_chain import Context, Layer, carried, layer_arity, layer_list, probe, ran_before, run_layer
from ipuexp.models.hf_heads import Head, head_for, label_specs
from ipuexp.models.hf_inputs import input_specs, task_labels
from ipuexp.models.hf_lists import ListEntry, sibling_lists
from ipuexp.models.hf_source import resolve
from ipuexp.models.hf_task import TaskHead
from ipuexp.models.spec import ModelNode
from ipuexp.models.transformer import Dropout

_OWN_HEAD_TASKS = ("pretraining", "masked-lm", "causal-lm", "classification", "question-answering")
"""Tasks whose heads block ipuexp builds from the head module (Graphcore's masked-LM on the masked positions)."""


def _layer_list(backbone: nn.Module, what: str) -> Tuple[nn.Module, str, nn.ModuleList]:
    return layer_list(backbone, what)


class Embeddings(nn.Module):
    """The backbone up to its first layer: its own forward, stopped by a probe in place of the layers."""

    def __init__(self, backbone: nn.Module, parts: List[nn.Module], layers: Tuple[nn.Module, str],
                 input_names: List[str], call_kwargs: Dict[str, Any], context: Context,
                 keep_inputs: bool = False) -> None:
        super().__init__()
        self.keep_inputs = keep_inputs  # pass the model's inputs on with the labels (a stack of several lists)
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
        return (hidden, *self._context.flatten(args, kwargs), *inputs[0 if self.keep_inputs else n:])


class StageEntry(nn.Module):
    """A stage's own work before its layers (ConvNeXt's downsampling): the stage's forward, stopped at its first
    layer. Takes the previous stage's chain (hidden, context, carried, what follows) and starts this stage's."""

    def __init__(self, stage: nn.Module, layers: Tuple[nn.Module, str], before: Context, context: Context) -> None:
        super().__init__()
        # what this block owns: the stage's modules but its layers (each layer is a block of its own)
        self.parts = nn.ModuleList([m for n, m in stage.named_children() if m is not getattr(*layers)])
        self.__dict__.update(_stage=stage, _layers=layers, _before=before, _context=context)
        self.arg = next(iter(inspect.signature(stage.forward).parameters))

    def forward(self, hidden: torch.Tensor, *rest: Any) -> Tuple[Any, ...]:
        hidden, args, kwargs = probe(self._stage, self._layers, {self.arg: hidden})
        return (hidden, *self._context.flatten(args, kwargs), *rest[self._before.width:])


def _stages(backbone: nn.Module, parent: nn.Module, name: str) -> List[Tuple[nn.Module, str]]:
    """The layer lists of a list of identical stages that holds ``parent`` (ConvNeXt's encoder.stages), in order;
    just ``parent``'s list when no such list holds it."""
    for module in backbone.modules():
        if isinstance(module, nn.ModuleList) and len({type(m) for m in module}) == 1 and \
                any(m is parent for m in module):
            return [(stage, name) for stage in module if len(getattr(stage, name, ()))]
    return [(parent, name)]


def _swap_dropout(model: nn.Module) -> None:
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Dropout:
                module._modules[name] = Dropout(child.p)


def build_hf(model_cfg: ModelNode) -> PipelinedModel:
    """The Transformers model of ``model_cfg`` (``name=hf``) as a PipelinedModel; no weights on the meta device."""
    from ipuexp.models.bert import mask_tokens_for

    register()
    source = resolve(model_cfg)
    task = str(model_cfg.hf.task)
    model = task_model(source, task)
    _swap_dropout(model)
    model.train()
    what = f"{source.label} ({type(model).__name__})"
    seq = int(getattr(model_cfg, "sequence_length", 128))
    mask_tokens = int(getattr(model_cfg, "mask_tokens", None) or mask_tokens_for(seq))
    if not 1 <= mask_tokens <= seq:
        raise ValueError(f"model.mask_tokens={mask_tokens} is invalid: allowed: 1 to model.sequence_length ({seq})")
    if getattr(model.config, "is_encoder_decoder", False) and task in ("seq2seq-lm", "pretraining"):
        from ipuexp.models.hf_seq2seq import build_seq2seq

        return build_seq2seq(model, source, model_cfg, task, what)
    backbone = model.base_model
    parent, name, layers = _layer_list(backbone, what)
    causal = any(getattr(m, "is_causal", False) is True for m in layers[0].modules())
    inputs = input_specs(source, model, backbone, causal, seq, model_cfg)
    call_kwargs = {"use_cache": False} if "use_cache" in inspect.signature(backbone.forward).parameters else {}
    segments = _stages(backbone, parent, name)
    example = {s.name: torch.zeros((1, *s.shape), dtype=getattr(torch, s.dtype)) for s in inputs}
    hidden, _a, _k, ran = ran_before(backbone, segments[0], {**example, **call_kwargs}, what)

    names = sibling_lists(backbone, parent, name, {**example, **call_kwargs}) if len(segments) == 1 else [name]
    multi = len(names) > 1  # several lists in one stack (LXMERT): the chain carries the model's inputs
    if multi:
        segments = [(parent, n) for n in names]
    contexts = [Context() for _ in segments]
    input_names = [s.name for s in inputs]
    blocks = [Block("embeddings", Embeddings(backbone, [], segments[0], input_names, call_kwargs, contexts[0],
                                             keep_inputs=multi))]
    # the first stage's layers are probed from the backbone's own call; later stages from their own
    stage_inputs: Dict[str, Any] = {**example, **call_kwargs}
    lists: List[Tuple[nn.Module, str, int]] = []
    index = 0
    for k, ((stage, list_name), context) in enumerate(zip(segments, contexts)):
        stack = backbone if k == 0 or multi else stage
        if k and multi:
            blocks.append(Block(list_name, ListEntry(backbone, lists, k, input_names, call_kwargs, contexts[k - 1],
                                                     context)))
        elif k:
            arg = next(iter(inspect.signature(stage.forward).parameters))
            stage_inputs = {arg: hidden}
            blocks.append(Block(f"stage{k}", StageEntry(stage, (stage, list_name), contexts[k - 1], context)))
        hidden, args, kwargs = probe(stack, (stage, list_name), stage_inputs)
        context.flatten(args, kwargs)
        carried(stack, (stage, list_name), stage_inputs, context)
        lists.append((stage, list_name, layer_arity(getattr(stage, list_name)[0], hidden, args, kwargs)))
        for i, layer in enumerate(getattr(stage, list_name)):
            blocks.append(Block(f"layer{index}", Layer(layer, context, first=i == 0), is_layer=True))
            index += 1
        if k + 1 < len(segments) and not multi:
            for layer in getattr(stage, list_name):  # the stage's output, for the next stage's probe
                out = run_layer(layer, hidden, args, kwargs)
                hidden = out[0] if isinstance(out, tuple) else out
    layer_modules = [m for stage, list_name in segments for m in getattr(stage, list_name)]
    before, tail = _split_backbone(backbone, layer_modules, ran)
    blocks[0].module.parts.extend(before)
    last = contexts[-1]
    own_head = task in _OWN_HEAD_TASKS and len(segments) == 1 and hidden.dim() == 3 and _plain_tail(tail)
    heads = {n: m for n, m in model.named_children() if m is not backbone and any(True for _ in m.parameters())}
    if own_head and len(heads) == 1:
        head = head_for(task, model, {n: m for n, m in model.named_children() if m is not backbone}, tail, causal,
                        source.is_vision, mask_tokens, what)
        kind = head.kind
        blocks.append(Block("heads", Head(head, last, width=last.width)))
        sizes = {"vocab_size": getattr(model.config, "vocab_size", None), "num_labels": model.config.num_labels}
        labels = label_specs(kind, seq, mask_tokens, sizes)
    else:
        target = int(getattr(model_cfg.hf, "target_length", 128))
        kind, labels = task_labels(task, model, hidden, seq, mask_tokens, target)
        if not multi:  # stages: each stage's layers return as the last stage's do
            lists = [(stage, list_name, lists[-1][2]) for stage, list_name in segments]
        blocks.append(Block("heads", TaskHead(model, lists, inputs, [s.name for s in labels], last.width, kind,
                                              extra=call_kwargs, positions=mask_tokens if kind == "mlm" else 0,
                                              saved=len(lists) - 1 if multi else 0,
                                              carry=list(last.carry.values()))))
    hparams = {"hf_config": source.label, "hf_task": task, "model_type": source.model_type,
               "layers": len(layer_modules), "transformers_class": type(model).__name__}
    if kind in ("mlm", "mlm+nsp"):
        hparams["mask_tokens"] = mask_tokens
    pipelined = PipelinedModel(blocks, name=f"hf:{source.label}", input_spec=inputs + labels, hparams=hparams)
    pipelined.__dict__["transformers_model"] = model  # the Transformers model whose modules the blocks hold
    return pipelined



def _plain_tail(tail: List[Tuple[str, nn.Module]]) -> bool:
    """A tail of final norms and/or a pooler, which ipuexp's own heads apply to the hidden states."""
    return all("pool" in name or "norm" in type(module).__name__.lower() for name, module in tail)


def _split_backbone(backbone: nn.Module, layers: List[nn.Module], ran: set
                    ) -> Tuple[List[nn.Module], List[Tuple[str, nn.Module]]]:
    """Backbone modules outside the layers: those the probe ran (embeddings) and the tail (norms, pooler)."""
    before: List[nn.Module] = []
    tail: List[Tuple[str, nn.Module]] = []
    layer_ids = {id(m) for m in layers}

    def visit(module: nn.Module, prefix: str) -> None:
        for name, child in module.named_children():
            if id(child) in layer_ids:
                continue
            if any(id(m) in layer_ids for m in child.modules()):
                visit(child, f"{prefix}{name}.")
            elif id(child) in ran:
                before.append(child)
            elif any(True for _ in child.parameters()):
                tail.append((f"{prefix}{name}", child))

    visit(backbone, "")
    return before, tail
