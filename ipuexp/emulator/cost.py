"""Cycles of the operations of a captured block on one IPU.

The IPU runs bulk-synchronous supersteps: sync, exchange, compute (IPU optimisation guide section 2.1). An
operation costs

* matmul/convolution: the tile partition ``emulator.matmul_plan.plan_matmul`` chooses, like PopLibs' planner.
* non-matmul work, one explicit term per class (``vector_op_cycles``): element-wise (transcendentals with an
  extra pass), normalisation (statistics in fp32, then normalise), softmax, reductions, copies and embedding
  gathers, each as passes over its elements at PopLibs' per-tile vector rate, divided by the fitted
  ``vector_efficiency``.
* every superstep: the BSP sync plus a fixed compute-set cost.

Backward costs come from the captured backward ops (about 2x forward, IPU optimisation guide section 5.3.2);
recomputation adds the forward again (``schedule``/``timing`` decide where).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, Sequence, Tuple

from ipuexp.emulator.matmul_plan import matmul_operands, plan_matmul
from ipuexp.emulator.vector_rate import VECTOR_BYTES_PER_CYCLE
from ipuexp.execution.hardware import TileContext
from ipuexp.graph.types import BlockCapture, BlockKey, OpRecord

# Passes over its elements (each a read-two-write-one vector pass at VECTOR_BYTES_PER_CYCLE) per op class, and
# the supersteps of one occurrence. Sources: PopLibs vertex structure (PerformanceEstimation.cpp) and each op's
# formula; the numbers are counts, not fits.
_TRANSCENDENTAL = ("gelu", "exp", "tanh", "sigmoid", "erf", "log", "softplus", "silu", "pow", "rsqrt", "sqrt")
_PASSES = {
    "elementwise": 1.0,   # one vector pass over the output
    "norm": 5.0,          # mean and variance in fp32 (2 passes at twice the fp16 cost) + normalise
    "norm_bwd": 8.0,      # two reductions (fp32) + the input gradient and the parameter gradients
    "softmax": 4.0,       # max, subtract-exp, sum, divide (fwd); bwd: product, sum, scaled subtract (3)
    "softmax_bwd": 3.0,
    "reduction": 1.0,     # one read pass of the input, partials then a final reduce
    "data": 1.0,          # a copy (re-layout): read one, write one
    "embedding": 1.5,     # multiSlice: ~1 cycle per element + per-row offsets (getMultiSliceCycleEstimate)
    "other": 1.0,
}
POWER_CYCLES_HALF, POWER_CYCLES_FLOAT = 325, 312
"""PopLibs ``lib/popops/popopsCycleEstimators.hpp``, ``BinaryOpType::POWER``: {325, false, 1} for half, {312, false,
1} for float: one element per inner loop, no vector width ("Power instruction not used": exp(b log a))."""
DIVIDE_CYCLES = {(2, True): 4.0, (2, False): 5.25, (4, True): 3.0, (4, False): 5.0}
"""Tile cycles per element of PopLibs' DIVIDE, by (bytes per element, divisor broadcast from one value):
``lib/popops/popopsCycleEstimators.hpp``, ``broadcastOpPerfInfo`` {8, false, 2} half and {6, false, 2} float per 2
elements, ``binaryOpPerfInfo`` {21, false, 4} half per 4 and {10, false, 2} float per 2; not vectorised, the six
workers sharing a tile's elements. PopTorch lowers ``aten::div`` to PopART's ``Div`` (``divHandler``), a
``popops::map(DIVIDE)`` of a tensor operand that is never folded to a multiply, and PopART's
``DivArg0GradOpPattern`` divides again for the gradient."""
SELECT_CYCLES = 5.0
"""Tile cycles per element of PopLibs' ``Select`` (``popopsCycleEstimators.cpp``, ``selectCycles``: 5 cycles per
element, vector width 1: three loads, a conditional move, a store). PopTorch lowers ``masked_fill`` and ``where``
to PopART's ``Where`` (``maskedFillHandler``), run as ``popops::select``; its gradient is a cast and a multiply
(``wherex.cpp``), vectorised, so only the forward pays it."""
_DIVIDE_OPS = ("aten.div", "aten.div_")
_SELECT_OPS = ("aten.where", "aten.masked_fill", "aten.masked_fill_")
TRANSCENDENTAL_PASSES = 1.0
"""Extra pass of a transcendental (GELU, exp, tanh, ...): no public cycle figure; one more vector pass."""
_SUPERSTEPS = {"norm": 2, "norm_bwd": 3, "softmax": 2, "softmax_bwd": 2, "reduction": 2, "embedding": 2}
"""Supersteps per occurrence: a cross-tile statistic needs a reduction superstep before the element-wise one."""


def vector_class(rec: "OpRecord") -> str:
    """The non-matmul term an op record belongs to."""
    kind = rec.kind if rec.kind in _PASSES else "other"
    if kind in ("norm", "softmax") and (rec.phase == "bwd" or "backward" in rec.op):
        return kind + "_bwd"
    return kind


@dataclass
class Cycles:
    """Cycles of some work on one IPU, split for the time breakdown."""

    compute: float = 0.0
    exchange: float = 0.0
    """Internal exchange, syncs and compute-set overheads."""

    @property
    def total(self) -> float:
        return self.compute + self.exchange

    def __iadd__(self, other: "Cycles") -> "Cycles":
        self.compute += other.compute
        self.exchange += other.exchange
        return self


@dataclass
class BlockCycles:
    fwd: Cycles
    bwd: Cycles


def op_cycles(rec: OpRecord, ctx: TileContext) -> Cycles:
    """Cycles of all occurrences of one op record."""
    count = max(rec.count, 1)
    if rec.kind in ("matmul", "conv"):
        if rec.matmul_shape:
            m, k, n = (max(int(x), 1) for x in rec.matmul_shape)
            a, b, batch, products = matmul_operands(rec, m, k, n)
            if rec.kind == "conv" and n == 1:  # one output channel per group: the vertical-MAC method
                from ipuexp.emulator.vmac import vmac_cycles

                compute, exchange = vmac_cycles(m, k, products, a + b, ctx)
                return Cycles(compute * count, exchange * count)
            plan = plan_matmul(m, k, n, round(a), round(b), batch, ctx)
            return Cycles(plan.compute_cycles * products * count, plan.exchange_cycles * products * count)
        amp = rec.flops / (ctx.compute_tiles * ctx.flops_per_cycle * ctx.amp_efficiency)
        return Cycles(amp, count * (ctx.sync_cycles + ctx.compute_set_cycles))
    if rec.kind == "data" and rec.elements_written == 0:
        return Cycles()  # a view: no data moves
    if rec.kind == "power":
        # popopsCycleEstimators.hpp: POWER is not vectorised, 325 cycles per half element (312 float) per
        # worker, the six workers sharing a tile's elements: that many tile cycles per element
        per_element = POWER_CYCLES_HALF if ctx.activation_bytes == 2 else POWER_CYCLES_FLOAT
        compute = rec.elements_written * per_element / ctx.compute_tiles
        return Cycles(compute, count * (ctx.sync_cycles + ctx.compute_set_cycles))
    if rec.kind == "ctc" and rec.matmul_shape:
        from ipuexp.emulator.ctc import ctc_cycles

        frames, batch, labels = (max(int(x), 1) for x in rec.matmul_shape)
        compute, exchange = ctc_cycles(frames, batch, labels, ctx.compute_tiles, ctx.workers,
                                       ctx.exchange_bytes_per_cycle)
        return Cycles(compute * count, exchange * count)
    cycles = vector_op_cycles(rec, ctx)
    scalar = _scalar_loop_cycles(rec, ctx)
    return Cycles(scalar, cycles.exchange) if scalar > cycles.compute else cycles


def _scalar_loop_cycles(rec: OpRecord, ctx: TileContext) -> float:
    """Cycles of an element-wise op whose PopLibs vertex is a scalar loop (a divide, a forward select), at
    PopLibs' own per-element cycles spread over the compute tiles; 0 for any other op."""
    if rec.kind != "elementwise":
        return 0.0
    elements = rec.elements_written
    if rec.op in _DIVIDE_OPS:
        broadcast = rec.elements_read < 1.5 * elements  # one operand a scalar: read once per element written
        return elements * DIVIDE_CYCLES[(4 if ctx.activation_bytes == 4 else 2, broadcast)] / ctx.compute_tiles
    if rec.op in _SELECT_OPS and rec.phase == "fwd":
        return elements * SELECT_CYCLES / ctx.compute_tiles
    return 0.0


def vector_op_cycles(rec: OpRecord, ctx: TileContext) -> Cycles:
    """Cycles of a non-matmul op record: its class's passes over its elements per tile at PopLibs' vector rate
    (fp32 elements cost twice fp16), over the fitted ``vector_efficiency``, plus its supersteps."""
    cls = vector_class(rec)
    passes = _PASSES[cls]
    if cls == "elementwise" and any(t in rec.op for t in _TRANSCENDENTAL):
        passes += TRANSCENDENTAL_PASSES
    # A reduction reads many elements to write few; everything else is counted on what it writes (or reads,
    # for in-place ops that write nothing new).
    elements = rec.elements_read if cls == "reduction" else max(rec.elements_written, rec.elements_read / 2)
    # One pass moves 3 elements (two read, one written) per output element.
    nbytes = 3.0 * elements * passes * ctx.activation_bytes
    compute = nbytes / (ctx.compute_tiles * VECTOR_BYTES_PER_CYCLE * ctx.vector_efficiency)
    steps = _SUPERSTEPS.get(cls, 1) * max(rec.count, 1)
    return Cycles(compute, steps * (ctx.sync_cycles + ctx.compute_set_cycles))


def block_cycles(block: BlockCapture, ctx: TileContext) -> BlockCycles:
    """Forward and backward cycles of one block per micro-batch."""
    fwd, bwd = Cycles(), Cycles()
    for rec in block.ops:
        if rec.phase == "fwd":
            fwd += op_cycles(rec, ctx)
        else:
            bwd += op_cycles(rec, ctx)
    return BlockCycles(fwd, bwd)


def blocks_cycles(blocks: Sequence[BlockCapture], ctx: TileContext,
                  memo: Dict[Tuple[Any, ...], BlockCycles] | None = None) -> BlockCycles:
    """Sum over ``blocks`` (read it, never change it: it is shared). ``memo`` is accepted for callers that keep one
    per ``ctx``; identical layers and stages share their cost through the bounded caches anyway."""
    return _stage_cycles(tuple(b.key for b in blocks), ctx)


@lru_cache(maxsize=8192)
def _stage_cycles(keys: Tuple[BlockKey, ...], ctx: TileContext) -> BlockCycles:
    fwd, bwd = Cycles(), Cycles()
    for key in keys:
        bc = _block_cycles(key, ctx)
        fwd += bc.fwd
        bwd += bc.bwd
    return BlockCycles(fwd, bwd)


@lru_cache(maxsize=8192)
def _block_cycles(key: BlockKey, ctx: TileContext) -> BlockCycles:
    return block_cycles(key.block, ctx)


def vector_cycles(nbytes: float, ctx: TileContext, supersteps: int = 1) -> Cycles:
    """Vector passes moving ``nbytes`` spread over the compute tiles (optimizer, gradient accumulation), at
    PopLibs' vector rate over the fitted efficiency."""
    compute = nbytes / (ctx.compute_tiles * VECTOR_BYTES_PER_CYCLE * ctx.vector_efficiency)
    return Cycles(compute, supersteps * (ctx.sync_cycles + ctx.compute_set_cycles))

