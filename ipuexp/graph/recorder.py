"""Per-op bookkeeping for a capture: a ``TorchDispatchMode`` that sees every aten op below autograd.

For each op it records the kind, elements read and written, FLOPs (from PyTorch's own flop-counter registry,
``torch.utils.flop_counter.flop_registry``, the formulas ``FlopCounterMode`` uses) and the [M, K, N] of matmuls
and convolutions. During a forward it also tracks the float storages alive, for the block's peak.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from ipuexp.graph.types import OpRecord

aten = torch.ops.aten

_MATMUL = {aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten.mv, aten.addmv, aten.dot, aten._scaled_mm}
_CONV = {aten.convolution, aten._convolution, aten.convolution_backward, aten.convolution_overrideable,
         aten._slow_conv2d_forward, aten.cudnn_convolution}
_NORM = {aten.native_layer_norm, aten.native_layer_norm_backward, aten.native_batch_norm,
         aten.native_batch_norm_backward, aten._native_batch_norm_legit, aten._native_batch_norm_legit_functional,
         aten._native_batch_norm_legit_no_training, aten.native_group_norm, aten.native_group_norm_backward}
_SOFTMAX = {aten._softmax, aten._softmax_backward_data, aten._log_softmax, aten._log_softmax_backward_data}
_EMBEDDING = {aten.embedding, aten.embedding_dense_backward, aten.index_select, aten.gather, aten.index_add,
              aten.scatter_add, aten.index_put, aten._embedding_bag, aten._embedding_bag_backward}
_REDUCTION = {aten.nll_loss_forward, aten.nll_loss_backward, aten.nll_loss2d_forward, aten.nll_loss2d_backward,
              aten.max_pool2d_with_indices, aten.max_pool2d_with_indices_backward, aten.avg_pool2d,
              aten.avg_pool2d_backward, aten._adaptive_avg_pool2d, aten._adaptive_avg_pool2d_backward}
# Data movement and tensor creation (clone is tagged pointwise by PyTorch but only copies).
_DATA = {aten.clone, aten.copy_, aten._to_copy, aten.cat, aten.stack, aten.empty, aten.empty_like,
         aten.empty_strided, aten.zeros, aten.zeros_like, aten.ones, aten.ones_like, aten.full, aten.full_like,
         aten.new_zeros, aten.new_ones, aten.new_empty, aten.new_empty_strided, aten.new_full, aten.fill_,
         aten.zero_, aten.arange, aten.scalar_tensor, aten._unsafe_view, aten.constant_pad_nd,
         # gradients of views: scatter a gradient into zeros of the base's shape
         aten.select_backward, aten.slice_backward, aten.as_strided_scatter}
# Creation ops: they write their output but read nothing (a "like" input only gives the shape).
_CREATION = {aten.empty, aten.empty_like, aten.empty_strided, aten.zeros, aten.zeros_like, aten.ones,
             aten.ones_like, aten.full, aten.full_like, aten.new_zeros, aten.new_ones, aten.new_empty,
             aten.new_empty_strided, aten.new_full, aten.arange, aten.scalar_tensor}
# Elementwise without PyTorch's pointwise tag.
_ELEMENTWISE = {aten.native_dropout, aten.bernoulli, aten.bernoulli_, aten.tril, aten.triu}
# Ops that alias an input without being marked as views in their schema.
_ALIASING = {aten._unsafe_view}
# Metadata queries: not operations.
_IGNORED = {aten.size, aten.sym_size, aten.stride, aten.sym_stride, aten.numel, aten.sym_numel, aten.dim,
            aten.is_contiguous, aten.sym_is_contiguous, aten.storage_offset, aten.sym_storage_offset,
            aten.is_strides_like_format, aten.is_non_overlapping_and_dense, aten.detach}


_CTC = {aten._ctc_loss}
"""The CTC loss: a recurrence over the frames (``emulator.ctc``), not an element-wise pass."""


def op_kind(func: Any) -> str:
    """matmul, conv, elementwise, norm, softmax, reduction, embedding, ctc, data or other."""
    packet = func._overloadpacket
    if packet in _CTC:
        return "ctc"
    if func.is_view or packet in _DATA:
        return "data"
    for kind, ops in (("matmul", _MATMUL), ("conv", _CONV), ("norm", _NORM), ("softmax", _SOFTMAX),
                      ("embedding", _EMBEDDING), ("reduction", _REDUCTION)):
        if packet in ops:
            return kind
    tags = func.tags
    if torch.Tag.pointwise in tags or packet in _ELEMENTWISE:
        return "elementwise"
    if torch.Tag.reduction in tags:
        return "reduction"
    return "other"


# Every ``pow`` runs as PopLibs' element-at-a-time POWER in a PopTorch model. PopTorch lowers ``aten::pow`` to
# PopART's ``Pow`` (``AtenHandlers.gen.cpp`` ``powHandler``), whose opx calls ``popops::pow`` with the exponent as a
# tensor (``popx/op/powx.cpp``); PopLibs' expression optimiser makes a power a vectorised square, sqrt, inverse or
# copy only when its right operand is an ``expr::Const`` (``ElementWiseInternal.cpp`` ``optimiseBinary``), which a
# tensor operand never is. So x ** 2 (T5's layer norm, the gradient of GPT-2's x ** 3) runs POWER too.


def grouped_backward_flops(mnk: List[int], output_mask: Any) -> int:
    """FLOPs of a grouped convolution's backward: one [M, K, N] product (groups folded into M) per gradient it
    computes, input and weight. PyTorch's flop counter (``conv_backward_flop``) counts a grouped convolution's input
    gradient as if it had one group, ``groups`` times too many: 513x the forward for ConvNeXt's depthwise layers."""
    m, k, n = mnk
    return 2 * m * k * n * sum(1 for computed in list(output_mask)[:2] if computed)


def matmul_shape(packet: Any, args: Tuple[Any, ...], out: Any) -> Optional[List[int]]:
    """[M, K, N] with any batch folded into M; for convolutions the implicit GEMM of the forward; for the CTC loss
    its problem, [frames, batch, label symbols]."""
    if packet in _CTC:  # log_probs [T, B, C], targets [B, L]
        return [int(args[0].shape[0]), int(args[0].shape[1]), int(args[1].shape[-1])]
    if packet in (aten.mm, aten.bmm):
        a, b = args[0].shape, args[1].shape
    elif packet in (aten.addmm, aten.baddbmm):
        a, b = args[1].shape, args[2].shape
    elif packet in (aten.mv, aten.dot, aten.addmv):
        mat, vec = (args[1], args[2]) if packet is aten.addmv else (args[0], args[1])
        m = int(mat.shape[0]) if mat.dim() == 2 else 1
        return [m, int(vec.shape[0]), 1]
    elif packet in (aten.convolution, aten._convolution, aten.convolution_backward):
        if packet is aten.convolution_backward:
            grad_out, x, w, groups = args[0], args[1], args[2], args[9]
            out_shape = grad_out.shape
        else:
            x, w, groups = args[0], args[1], args[8]
            out_shape = out.shape
        spatial = 1
        for d in out_shape[2:]:
            spatial *= int(d)
        k = int(w.shape[1])
        for d in w.shape[2:]:
            k *= int(d)
        return [int(x.shape[0]) * spatial * groups, k, int(w.shape[0]) // groups]
    else:
        return None
    m = 1
    for d in a[:-1]:
        m *= int(d)
    return [m, int(a[-1]), int(b[-1])]


def _numel(values: Any) -> int:
    flat, _ = tree_flatten(values)
    return sum(v.numel() for v in flat if isinstance(v, torch.Tensor))


class OpRecorder(TorchDispatchMode):
    """Accumulates merged :class:`OpRecord` entries for the current bucket (block, phase)."""

    def __init__(self, exclude_storages: Set[int]) -> None:
        super().__init__()
        self.exclude = exclude_storages
        """Storages never counted as activations (parameters)."""
        self.records: Dict[Tuple[Any, ...], OpRecord] = {}
        self.phase = "fwd"
        self.op_count = 0
        self.track_live = False
        self._live: Dict[int, Tuple[StorageWeakRef, int]] = {}
        self.peak = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # PyTorch wraps a mode's __torch_dispatch__ in torch._dynamo.disable unless this says otherwise; the
        # recorder never runs under torch.compile, and the wrapper costs an import of torch._dynamo (about a
        # second) plus a call per op.
        return False

    def start(self, phase: str, live_inputs: List[torch.Tensor]) -> None:
        """Begin a new bucket; in forward, start live tracking from the block's inputs."""
        self.records, self.phase, self.op_count = {}, phase, 0
        self.track_live = phase == "fwd"
        self._live, self.peak = {}, 0
        if self.track_live:
            for t in live_inputs:
                self._add_live(t)
            self._update_peak()

    def _add_live(self, t: torch.Tensor) -> None:
        if not t.is_floating_point():
            return
        storage = t.untyped_storage()
        key = storage._cdata
        if key in self._live or key in self.exclude:
            return
        self._live[key] = (StorageWeakRef(storage), storage.nbytes() // t.element_size())

    def _update_peak(self) -> None:
        expired = [k for k, (ref, _) in self._live.items() if ref.expired()]
        for k in expired:
            del self._live[k]
        total = sum(n for _, n in self._live.values())
        if total > self.peak:
            self.peak = total

    def __torch_dispatch__(self, func: Any, types: Any, args: Tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        packet = func._overloadpacket
        if packet in _IGNORED:
            return func(*args, **kwargs)
        if packet not in flop_registry:
            # Same rule as FlopCounterMode: let composite ops decompose so their matmuls are seen.
            with self:
                r = func.decompose(*args, **kwargs)
            if r is not NotImplemented:
                return r
        out = func(*args, **kwargs)
        self.op_count += 1
        self._record(func, packet, args, kwargs, out)
        if self.track_live:
            flat, _ = tree_flatten(out)
            for t in flat:
                if isinstance(t, torch.Tensor):
                    self._add_live(t)
            self._update_peak()
        return out

    def _record(self, func: Any, packet: Any, args: Tuple[Any, ...], kwargs: Any, out: Any) -> None:
        kind = "power" if packet is aten.pow else op_kind(func)
        aliasing = func.is_view or packet in _ALIASING
        flops = int(flop_registry[packet](*args, **kwargs, out_val=out)) if packet in flop_registry else 0
        mnk = matmul_shape(packet, args, out) if kind in ("matmul", "conv", "ctc") else None
        if packet is aten.convolution_backward and int(args[9]) > 1 and mnk:
            flops = grouped_backward_flops(mnk, args[10])
        flat_out, _ = tree_flatten(out)
        first = next((t for t in flat_out if isinstance(t, torch.Tensor)), None)
        key = (str(packet), tuple(mnk) if mnk else None, tuple(first.shape) if first is not None else ())
        rec = self.records.get(key)
        if rec is None:
            rec = self.records[key] = OpRecord(op=f"aten.{packet.__name__}", kind=kind, phase=self.phase,
                                               count=0, flops=0, elements_read=0, elements_written=0,
                                               matmul_shape=mnk)
        rec.count += 1
        rec.flops += flops
        if not aliasing:
            if packet not in _CREATION:
                rec.elements_read += _numel((args, kwargs))
            rec.elements_written += _numel(out)
