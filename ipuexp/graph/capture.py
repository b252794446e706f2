"""Capture a model's graph on meta tensors: per block and phase, the ops, FLOPs, saved activations and peaks.

The model is built on the meta device (shapes and dtypes only: no weights are allocated and no arithmetic is
done). Blocks run forward one by one on detached copies of the previous block's outputs, then backward one by
one in reverse with an all-ones output gradient, so every aten op lands in exactly one (block, phase) bucket.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ipuexp.graph import types
from ipuexp.graph.types import BlockCapture, Graph, OpRecord, TensorInfo
from ipuexp.models.spec import ModelNode


@dataclass
class _SavedTensors:
    """Tensors autograd saves for backward during one block's forward, deduplicated by storage."""

    exclude: set
    float_elements: Dict[int, int] = field(default_factory=dict)
    int_bytes: Dict[int, int] = field(default_factory=dict)

    def pack(self, t: Any) -> Any:
        storage = t.untyped_storage()
        key = storage._cdata
        if key not in self.exclude:
            if t.is_floating_point():
                self.float_elements[key] = storage.nbytes() // t.element_size()
            else:
                self.int_bytes[key] = storage.nbytes()
        return t

    @staticmethod
    def unpack(t: Any) -> Any:
        return t

    def elements_of(self, values: Tuple[Any, ...]) -> int:
        """Saved float elements whose storage is one of ``values`` (a block's inputs or outputs)."""
        import torch

        keys = {v.untyped_storage()._cdata for v in values if isinstance(v, torch.Tensor)}
        return sum(n for k, n in self.float_elements.items() if k in keys)


@dataclass
class _Ownership:
    parameters: int = 0
    tensors: int = 0
    largest: int = 0
    tied: int = 0


def _ownership(blocks: List[Any]) -> List[_Ownership]:
    """Parameters per block; a tensor shared by several blocks belongs to the first that holds it."""
    seen: set = set()
    result = []
    for block in blocks:
        own = _Ownership()
        for p in block.parameters():
            if id(p) in seen:
                own.tied += p.numel()
                continue
            seen.add(id(p))
            own.parameters += p.numel()
            own.tensors += 1
            own.largest = max(own.largest, p.numel())
        result.append(own)
    return result


def _info(values: Tuple[Any, ...]) -> List[TensorInfo]:
    import torch

    return [TensorInfo(shape=[int(d) for d in v.shape], dtype=str(v.dtype).replace("torch.", ""),
                       elements=int(v.numel())) for v in values if isinstance(v, torch.Tensor)]


def _detach(values: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """Cut the chain at a block boundary; float tensors keep whether they need a gradient."""
    import torch

    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            d = v.detach()
            if v.is_floating_point() and v.requires_grad:
                d.requires_grad_(True)
            v = d
        out.append(v)
    return tuple(out)


# Attributes that only number a layer (Transformers' attention modules keep ``layer_idx`` to index a KV cache,
# which a training step has none of); what a layer's position changes is kept in attributes of its own
# (``attention_type``, ``sliding_window``), which stay in the signature.
_POSITION_ATTRIBUTES = frozenset({"layer_idx"})


def _signature(block: Any, inputs: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """What determines a block's ops: its wrapped module tree (types, plain attributes, parameter and buffer
    shapes) and its inputs' shapes. Blocks with equal signatures dispatch identical ops (repeated layers)."""
    import torch

    plain = (int, float, str, bool, type(None))
    modules = tuple((type(m).__qualname__, type(m).__module__,
                     tuple(sorted((k, v) for k, v in vars(m).items()
                                  if isinstance(v, plain) and k not in _POSITION_ATTRIBUTES)))
                    for m in block.module.modules())
    tensors = tuple((n, tuple(t.shape), t.dtype, t.requires_grad)
                    for n, t in [*block.module.named_parameters(), *block.module.named_buffers()])
    ins = tuple((tuple(v.shape), v.dtype, v.requires_grad) if isinstance(v, torch.Tensor) else repr(v)
                for v in inputs)
    return modules, tensors, ins


def _replay_outputs(rep: Dict[str, Any], inputs: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """Outputs of a block that repeats ``rep``: inputs passed through stay themselves, new tensors are
    fresh meta tensors of the representative's shapes."""
    import torch

    out = []
    for t in rep["outputs"]:
        same = next((k for k, v in enumerate(rep["inputs"]) if v is t), None)
        if same is not None:
            out.append(inputs[same])
        elif isinstance(t, torch.Tensor):
            out.append(torch.empty_like(t, device="meta").requires_grad_(t.requires_grad))
        else:
            out.append(t)
    return tuple(out)


def capture_model(build: Callable[[], Any], micro_batch_size: int, reuse: bool = True) -> Graph:
    """Capture the ``PipelinedModel`` returned by ``build()`` (called under ``torch.device("meta")``).

    A block whose signature (see ``_signature``) equals an earlier block's is not run again: its records are
    the earlier block's, which is exact because the dispatched ops depend only on what the signature holds.
    ``reuse=False`` runs every block (for checking that claim).
    """
    import torch

    from ipuexp.graph.recorder import OpRecorder
    from ipuexp.models.blocks import PipelinedModel

    start = time.perf_counter()
    with torch.device("meta"):
        model = build()
        if not isinstance(model, PipelinedModel):
            raise TypeError(f"capture: expected an ipuexp.PipelinedModel, got {type(model).__name__}")
        model.train()
        blocks = list(model.blocks)
        owners = _ownership(blocks)
        exclude = {t.untyped_storage()._cdata for t in [*model.parameters(), *model.buffers()]}
        recorder = OpRecorder(exclude)
        inputs = tuple(model.example_inputs(micro_batch_size, device="meta"))
        x, runs, seen = inputs, [], {}
        for block in blocks:
            block_in = _detach(x)
            key = _signature(block, block_in) if reuse else len(runs)
            if key in seen:
                rep = runs[seen[key]]
                run = dict(rep, inputs=block_in, outputs=_replay_outputs(rep, block_in), rep=seen[key])
            else:
                seen[key] = len(runs)
                saved = _SavedTensors(exclude)
                recorder.start("fwd", [v for v in block_in if isinstance(v, torch.Tensor)])
                with recorder, torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
                    out = block(*block_in)
                run = dict(inputs=block_in, outputs=out, saved=saved, fwd=list(recorder.records.values()),
                           op_count_fwd=recorder.op_count, peak=recorder.peak, rep=None,
                           saved_in=saved.elements_of(block_in), saved_out=saved.elements_of(tuple(out)))
            runs.append(run)
            x = run["outputs"]
        for i in reversed(range(len(blocks))):
            run, out = runs[i], runs[i]["outputs"]
            if run["rep"] is not None:
                continue
            if i == len(blocks) - 1:
                roots = [out[0]]  # the loss
            else:
                roots = [t for t in out if isinstance(t, torch.Tensor) and t.requires_grad]
            grads = [torch.ones_like(t) for t in roots]  # arrives from the next stage: not an op of this block
            recorder.start("bwd", [])
            if roots:
                with recorder:
                    torch.autograd.backward(roots, grads)
            run["bwd"], run["op_count_bwd"] = list(recorder.records.values()), recorder.op_count
        for run in runs:
            if run["rep"] is not None:
                run["bwd"], run["op_count_bwd"] = runs[run["rep"]]["bwd"], runs[run["rep"]]["op_count_bwd"]
    captures = [_block_capture(b, run, own) for b, run, own in zip(blocks, runs, owners, strict=True)]
    in_bytes = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
    in_elements = sum(t.numel() for t in inputs if isinstance(t, torch.Tensor))
    meta = {"torch": torch.__version__, "capture_format": str(types.CAPTURE_FORMAT)}
    meta.update({k: str(v) for k, v in model.hparams.items()})
    return Graph(
        model=model.name,
        micro_batch_size=micro_batch_size,
        blocks=captures,
        input_bytes_per_sample=in_bytes // micro_batch_size,
        input_elements_per_sample=in_elements // micro_batch_size,
        num_layers=sum(1 for b in blocks if b.is_layer),
        capture_seconds=round(time.perf_counter() - start, 4),
        meta=meta,
    )


def _block_capture(block: Any, run: Dict[str, Any], own: _Ownership) -> BlockCapture:
    fwd: List[OpRecord] = [dataclasses.replace(r) for r in run["fwd"]]
    bwd: List[OpRecord] = [dataclasses.replace(r) for r in run["bwd"]]
    saved: _SavedTensors = run["saved"]
    return BlockCapture(
        name=block.name,
        is_layer=block.is_layer,
        parameters=own.parameters,
        parameter_tensors=own.tensors,
        largest_parameter=own.largest,
        fwd_flops=sum(r.flops for r in fwd),
        bwd_flops=sum(r.flops for r in bwd),
        saved_elements=sum(saved.float_elements.values()),
        saved_int_bytes=sum(saved.int_bytes.values()),
        saved_input_elements=run["saved_in"],
        saved_output_elements=run["saved_out"],
        peak_fwd_elements=run["peak"],
        inputs=_info(run["inputs"]),
        outputs=_info(run["outputs"]),
        ops=fwd + bwd,
        op_count_fwd=run["op_count_fwd"],
        op_count_bwd=run["op_count_bwd"],
        tied_parameters=own.tied,
    )


def capture(model_cfg: ModelNode, micro_batch_size: int, cache_dir: Optional[str] = None,
            use_cache: bool = True) -> Graph:
    """The :class:`Graph` of ``model_cfg`` at ``micro_batch_size``, from the JSON cache when present.

    ``cache_dir`` defaults to ``IPUEXP_CACHE_DIR`` or ``~/.cache/ipuexp``; ``use_cache=False`` neither reads nor
    writes the cache.
    """
    from ipuexp.graph import cache

    if isinstance(micro_batch_size, bool) or not isinstance(micro_batch_size, int) or micro_batch_size < 1:
        raise ValueError(f"data.micro_batch_size: {micro_batch_size!r} is not allowed; allowed: a positive integer")
    path = cache.entry_path(model_cfg, micro_batch_size, cache_dir) if use_cache else None
    if path is not None:
        graph = cache.load(path)
        if graph is not None and _matches(graph, model_cfg, micro_batch_size):
            return graph
    from ipuexp.models import build_model

    graph = capture_model(lambda: build_model(model_cfg), micro_batch_size)
    if path is not None:
        cache.save(graph, path)
    return graph


def _matches(graph: Graph, model_cfg: ModelNode, micro_batch_size: int) -> bool:
    """Whether a cached capture is of the model it is keyed on (its micro-batch, its layer blocks): an entry
    that is not, edited or of another model, is captured again and rewritten rather than trusted."""
    from ipuexp.models import zoo_layers

    if graph.micro_batch_size != micro_batch_size or sum(b.is_layer for b in graph.blocks) != graph.num_layers:
        return False
    try:
        return graph.num_layers == zoo_layers(model_cfg)
    except ValueError:  # the model's own error comes from the capture
        return False
