"""Capture a script's model as PopTorch splits it: one forward on meta tensors, each op in the block that was active
when it ran (``Block``, ``BeginBlock``, ``BlockFunction``), then each block's backward on its own.

A tensor an op reads from another block is cut there (the copy an IPU receives over IPU-Links): the reading block
gets a fresh leaf in its place, so every block's backward stays inside the block, as in ipuexp's own capture
(``ipuexp.graph.capture``), whose per-block records, saved-tensor accounting and ``Graph`` this fills in. Model
inputs a later block reads travel along the blocks before it, as ipuexp's models pass their labels.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.utils._pytree import tree_flatten, tree_map

from ipuexp.graph import types
from ipuexp.graph.capture import _SavedTensors
from ipuexp.graph.types import BlockCapture, Graph, OpRecord, TensorInfo
from ipuexp.poptorch import ops
from ipuexp.poptorch.blocks import listening
from ipuexp.poptorch.casting import casting
from ipuexp.poptorch.splitter import BlockRun, Splitter

IPU_INT = {torch.int64: "int32", torch.float64: "float32"}
"""The IPU has no 64-bit types: PopTorch casts 64-bit inputs to 32 bits."""


@dataclass
class SplitModel:
    """A captured model: its graph and, per block in execution order, the IPU its annotation named."""

    graph: Graph
    ipu_ids: List[Optional[int]]
    checkpoints: int
    """``recomputationCheckpoint`` calls in the captured forward."""

    @property
    def names(self) -> List[str]:
        return [b.name for b in self.graph.blocks]


def _meta(t: Any) -> Any:
    if not isinstance(t, torch.Tensor):
        return t
    return torch.empty(t.shape, dtype=t.dtype, device="meta").requires_grad_(t.requires_grad)


def _micro_batch(t: Any, size: int) -> Any:
    if not isinstance(t, torch.Tensor) or t.dim() == 0:
        return t
    return torch.empty((size, *t.shape[1:]), dtype=t.dtype, device="meta")


def _info(values: List[torch.Tensor]) -> List[TensorInfo]:
    return [TensorInfo(shape=[int(d) for d in v.shape], dtype=IPU_INT.get(v.dtype, str(v.dtype).replace("torch.", "")),
                       elements=int(v.numel())) for v in values]


def _bytes(t: torch.Tensor) -> int:
    return t.numel() * (4 if t.dtype in IPU_INT else t.element_size())


def split_model(model: torch.nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any], micro_batch_size: int,
                training: bool, name: str) -> SplitModel:
    """Capture ``model`` called with one micro-batch of ``args`` and ``kwargs``: on meta tensors of their shapes, or,
    when the model's code reads values (a Transformers mask skipped when nothing is padded), on the call's first
    micro-batch with copies of the weights, which the capture's backward leaves untouched."""
    checkpoints = int(ops.marks["checkpoints"])
    # functional_call swaps the module's tensors for the capture's and puts them back, but not a weight tied across
    # modules when the call raises: the model's own tensors are put back here
    own = [(m, kind, n, t) for m in model.modules() for kind in ("_parameters", "_buffers")
           for n, t in getattr(m, kind).items()]
    try:
        split = _split(model, args, kwargs, micro_batch_size, training, name, meta=True)
    except (RuntimeError, NotImplementedError) as exc:
        for module, kind, n, t in own:
            getattr(module, kind)[n] = t
        if "meta" not in str(exc):
            raise
        ops.marks["checkpoints"] = checkpoints
        with torch.random.fork_rng(devices=[]):  # the script's random numbers stay as they would be
            split = _split(model, args, kwargs, micro_batch_size, training, name, meta=False)
    split.checkpoints = int(ops.marks["checkpoints"]) - checkpoints
    return split


def _real(t: torch.Tensor, is_param: bool) -> torch.Tensor:
    return t.detach().requires_grad_(t.requires_grad) if is_param else t.detach().clone()


def _split(model: torch.nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any], micro_batch_size: int,
           training: bool, name: str, meta: bool) -> SplitModel:
    start = time.perf_counter()
    names = {n for n, _ in model.named_parameters()}
    state = {n: _meta(t) if meta else _real(t, n in names)
             for n, t in [*model.named_parameters(), *model.named_buffers()]}
    # parameters stay parameters (a forward may look one up: Module.get_parameter)
    state.update({n: torch.nn.Parameter(state[n], requires_grad=state[n].requires_grad) for n in names})
    params = {id(state[n]): state[n] for n in names}
    exclude = {t.untyped_storage()._cdata for t in state.values()}
    if meta:
        margs, mkwargs = tree_map(lambda v: _micro_batch(v, micro_batch_size), (args, kwargs))
    else:
        margs, mkwargs = tree_map(lambda v: v[:micro_batch_size] if isinstance(v, torch.Tensor) and v.dim() else v,
                                  (args, kwargs))
    inputs = [t for t in tree_flatten((margs, mkwargs))[0] if isinstance(t, torch.Tensor)]
    splitter = Splitter(params, inputs, exclude)
    weights = list(params.values()) + ([] if training else [t for n, t in state.items() if n not in names])
    cast = casting(weights, inputs)
    was_training = model.training
    model.train(training)
    try:
        # an inference model runs without autograd, as on the IPU: it saves nothing for a backward pass
        grad = contextlib.nullcontext() if training else torch.no_grad()
        with grad, listening(splitter), torch.autograd.graph.saved_tensors_hooks(splitter.pack, _SavedTensors.unpack):
            splitter.start()
            try:
                with cast, splitter:
                    out = torch.func.functional_call(model, state, margs, mkwargs, tie_weights=True, strict=False)
            finally:
                splitter.finish()
            loss = ops.loss_of(out) if training else None
        runs = list(splitter.blocks.values())
        for run in runs:
            run.fwd, run.op_count_fwd, run.peak = (list(run.recorder.records.values()), run.recorder.op_count,
                                                   run.recorder.peak)
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        outputs.sort(key=lambda t: t is not loss)  # the loss first, as ipuexp's models return it
        for t in outputs:
            owner = splitter.blocks.get(splitter.producer.get(t, runs[-1].name), runs[-1])
            if not any(o is t for o in owner.outputs):
                owner.outputs.append(t)
        bwd: Dict[str, Tuple[List[OpRecord], int]] = {}
        for run in reversed(runs if training else []):
            roots = [t for t in run.outputs if t.is_floating_point() and t.requires_grad
                     and (t is loss or any(t is v for v in splitter.keep))]
            grads = [torch.ones_like(t) for t in roots]  # arrive from the next stage: not ops of this block
            run.recorder.start("bwd", [])
            if roots:
                with run.recorder:
                    torch.autograd.backward(roots, grads)
            bwd[run.name] = (list(run.recorder.records.values()), run.recorder.op_count)
    finally:
        model.train(was_training)
    _travel(runs, inputs)
    blocks = [_capture(run, *bwd.get(run.name, ([], 0))) for run in runs]
    per_sample = [t for t in inputs]
    return SplitModel(
        graph=Graph(model=name, micro_batch_size=micro_batch_size, blocks=blocks,
                    input_bytes_per_sample=sum(_bytes(t) for t in per_sample) // micro_batch_size,
                    input_elements_per_sample=sum(t.numel() for t in per_sample) // micro_batch_size,
                    num_layers=len(blocks), capture_seconds=round(time.perf_counter() - start, 4),
                    meta={"torch": torch.__version__, "capture_format": str(types.CAPTURE_FORMAT),
                          "source": "poptorch script"}),
        ipu_ids=[run.ipu_id for run in runs], checkpoints=0)


def _travel(runs: List[BlockRun], inputs: List[torch.Tensor]) -> None:
    """A model input first read in block k enters at the first block and is passed along to k."""
    order = {id(t): i for i, t in enumerate(inputs)}
    for k, run in enumerate(runs):
        for t in [t for t in run.inputs if id(t) in order]:
            for i in range(k):
                if not any(v is t for v in runs[i].inputs):
                    runs[i].inputs.append(t)
                runs[i].travelling.append(t)
    for run in runs:
        run.inputs.sort(key=lambda t: order.get(id(t), -1))
        run.outputs += [t for t in run.travelling if not any(v is t for v in run.outputs)]


def _capture(run: BlockRun, bwd: List[OpRecord], op_count_bwd: int) -> BlockCapture:
    saved = run.saved
    return BlockCapture(
        name=run.name, is_layer=True, parameters=run.parameters, parameter_tensors=run.parameter_tensors,
        largest_parameter=run.largest_parameter, fwd_flops=sum(r.flops for r in run.fwd),
        bwd_flops=sum(r.flops for r in bwd), saved_elements=sum(saved.float_elements.values()),
        saved_int_bytes=sum(saved.int_bytes.values()), saved_input_elements=saved.elements_of(tuple(run.inputs)),
        saved_output_elements=saved.elements_of(tuple(run.outputs)), peak_fwd_elements=run.peak,
        inputs=_info(run.inputs), outputs=_info(run.outputs), ops=run.fwd + bwd, op_count_fwd=run.op_count_fwd,
        op_count_bwd=op_count_bwd, tied_parameters=run.tied)
