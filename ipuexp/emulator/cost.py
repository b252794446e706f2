"""Cycles of the operations of a captured block on one IPU.

The IPU runs bulk-synchronous supersteps: sync, exchange, compute (IPU optimisation guide section 2.1). An
operation costs

* matmul/convolution: a tile partition chosen like PopLibs' planner (split M, K, N over the compute tiles; the
  operands each tile needs are received over the exchange at ``exchange_bytes_per_cycle`` per tile, as PopLibs'
  ``ExchangeEstimator`` counts them; partials split over K are reduced in a second superstep). The plan must fit
  the ``availableMemoryProportion`` share of tile memory, otherwise the operation is serialised into steps; when
  nothing fits, the planner drops the proportion and takes the plan needing the least memory (IPU optimisation
  guide sections 4.1 and 5.1). Plans are cached per shape and tile context, so a sweep re-plans nothing. AMP
  compute runs at the precision's rate; half partials double it and halve the partials' memory (IPU optimisation
  guide section 5.2). Each pass of the AMP vertex over one input- and one output-channel group of a tile adds
  PopLibs' fixed worker and supervisor cycles, so few rows per tile cost more than their multiply-accumulates.
* non-matmul work, one explicit term per class (``vector_op_cycles``): element-wise (transcendentals with an
  extra pass), normalisation (statistics in fp32, then normalise), softmax, reductions, copies and embedding
  gathers, each as passes over its elements at PopLibs' per-tile vector rate, divided by the fitted
  ``vector_efficiency``.
* every superstep: the BSP sync plus a fixed compute-set cost.

Backward costs come from the captured backward ops (about 2x forward, IPU optimisation guide section 5.3.2);
recomputation adds the forward again (``schedule``/``timing`` decide where).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Dict, Sequence, Tuple

import numpy as np

from ipuexp.graph.types import BlockCapture, BlockKey, OpRecord
from ipuexp.execution.hardware import TileContext

MAX_SERIAL_SPLIT = 64
"""Largest number of serial steps a plan may take to fit the memory proportion."""

VECTOR_BYTES_PER_CYCLE = 8.0
"""Bytes a tile moves per cycle in a vectorised fp16 pass that reads two operands and writes one (PopLibs
``PerformanceEstimation.cpp``, ``getScaledArithmeticSupervisorCycleEstimate`` half/half: 3 worker cycles per 64-bit
vector of 4 halves, 6 workers time-sliced, so 0.75 tile cycles per element, 24 bytes per 3 cycles). The
47.5 TB/s load/store peak (24.3 B/cycle/tile, one cycle a vector) needs interleaved memory that compiled vertices
rarely reach (Jia et al. 2019: compiler-generated loops reach about 1/4 of the load-bandwidth peak)."""

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
TRANSCENDENTAL_PASSES = 1.0
"""Extra pass of a transcendental (GELU, exp, tanh, ...): no public cycle figure; one more vector pass."""
_SUPERSTEPS = {"norm": 2, "norm_bwd": 3, "softmax": 2, "softmax_bwd": 2, "reduction": 2, "embedding": 2}
"""Supersteps per occurrence: a cross-tile statistic needs a reduction superstep before the element-wise one."""


# The AMP vertex (PopLibs ``ConvPartial1x1Out``, cycle estimates in poplin ``PerformanceEstimation.hpp``,
# half activations with 16 conv units or float partials with 8, state retention on): each worker streams its field
# elements through the AMP at 4 worker cycles each, and every pass over one input-channel group and one
# output-channel group of the conv units costs fixed cycles on top.
AMP_WORKER_PASS_CYCLES = 18.0
"""Worker cycles of one pass beyond 4 per field element: 37 + 4 (N - 3) - 7 (retention) = 4 N + 18."""
AMP_SUPERVISOR_PASS_CYCLES = 58.0
"""Supervisor cycles per pass: 19 per output group + 7 per output pass + 32 weight loads (16 conv units x 32 bytes
of weights at 16 bytes per cycle, ``getConvPartialAmpSupervisorWeightLoadCycleEstimate``)."""
AMP_IN_GROUP_CYCLES = 16.0
"""Supervisor cycles per input-channel group (15 - 1 + 1 + the zeroing branch)."""
AMP_VERTEX_CYCLES = 50.0
"""Supervisor cycles per vertex outside its loops (``supervisorNonloopOverhead``)."""


def amp_conv_units(ctx: TileContext) -> int:
    """Output channels the AMP computes per pass: the conv units (16 at half partials, 8 at float). One field
    element takes 4 cycles of a worker (``coreCycles``) over ``conv units x input grain`` multiply-accumulates, so
    with 6 workers: conv units = 2 x FLOPs per cycle / input grain."""
    return max(1, int(round(2.0 * ctx.flops_per_cycle / ctx.amp_grain)))


def amp_pass_overhead_cycles(workers: int) -> float:
    """Tile cycles of one AMP pass beyond its field elements: the slowest worker's fixed cycles, for every worker
    slot of the barrel-threaded tile, plus the supervisor's."""
    return workers * AMP_WORKER_PASS_CYCLES + AMP_SUPERVISOR_PASS_CYCLES


def vector_class(rec: "OpRecord") -> str:
    """The non-matmul term an op record belongs to."""
    kind = rec.kind if rec.kind in _PASSES else "other"
    if kind in ("norm", "softmax") and (rec.phase == "bwd" or "backward" in rec.op):
        return kind + "_bwd"
    return kind


@dataclass(frozen=True)
class MatmulPlan:
    """The chosen partition of one matmul occurrence."""

    split_m: int
    split_k: int
    split_n: int
    serial: int
    """Serial steps (1 when the plan fits the memory proportion in one go)."""
    compute_cycles: float
    """AMP and partial-reduction cycles."""
    exchange_cycles: float
    """Operand and partial exchange plus superstep overheads."""
    temp_bytes_per_tile: float
    fits: bool
    """False when no plan fits the proportion: the plan needing the least temporary memory is used."""

    @property
    def cycles(self) -> float:
        return self.compute_cycles + self.exchange_cycles


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


@lru_cache(maxsize=64)
def _candidates(tiles: int) -> np.ndarray:
    """Tile splits tried along one dimension: every small count, the powers of two (and three times them) and
    the tile count divided by small counts (so that every tile can be used)."""
    values = set(range(1, 33)) | {tiles // d for d in range(1, 33)}
    p = 1
    while p <= tiles:
        values.update((p, 3 * p))
        p *= 2
    return np.array(sorted(v for v in values if v <= tiles), dtype=np.float64)


def _evaluate(m: np.ndarray, k: float, n: np.ndarray, a: np.ndarray, b: np.ndarray, batch: np.ndarray,
              pm: np.ndarray, pk: np.ndarray, ctx: TileContext) -> Tuple[np.ndarray, ...]:
    """The (split_m, split_k) candidates ``pm``, ``pk`` of products (one row each: ``m``, ``n``, operand elements
    ``a`` and ``b`` and ``batch`` per row, ``k`` shared), split_n taking the remaining tiles: split_n, the temporary
    bytes per tile, and the cost in parts that the fitted constants scale (so that a plan space serves any
    calibration): AMP cycles at full efficiency, partial-reduction bytes, exchange cycles and supersteps.

    ``batch`` > 1 is a batched product (M holds ``batch`` independent row blocks, each with its own right
    operand): splitting M then also splits the right operand."""
    pn = np.minimum(np.floor(ctx.compute_tiles / (pm * pk)), np.maximum(n, 1))
    mt, kt, nt = np.ceil(m / pm), np.ceil(k / pk), np.ceil(n / pn)
    g, w = ctx.amp_grain, ctx.workers
    units = amp_conv_units(ctx)
    # A batched product puts whole groups on a tile: each group is its own pass over the AMP.
    groups = np.maximum(1.0, np.ceil(batch / pm))
    rows = np.ceil(mt / groups / w)  # field elements per worker and group
    in_groups, out_groups = np.ceil(kt / g), np.ceil(nt / units)
    passes = groups * in_groups * out_groups
    # AMP work per tile: K padded to the AMP's input grain and N to its conv units, rows shared over the workers.
    amp = 2.0 * passes * rows * w * units * g / ctx.flops_per_cycle
    overhead = amp_pass_overhead_cycles(w) * passes + AMP_IN_GROUP_CYCLES * groups * in_groups + AMP_VERTEX_CYCLES
    a_recv = a / (pm * pk) * ctx.input_bytes
    b_recv = b / (pk * pn * np.minimum(pm, batch)) * ctx.input_bytes
    # The left operand (activations) goes to all split_n tiles of its row block; PopLibs places those tiles in
    # pairs sharing an exchange bus, which receive the same data in the same cycle (ExchangeEstimator: double
    # bandwidth for input elements when the output-channel split is even).
    a_rate = np.where(pn % 2 == 0, 2.0, 1.0) * ctx.exchange_bytes_per_cycle
    partials = mt * nt * ctx.partial_bytes
    reduce_share = (pk - 1) / pk
    # Partials split over K are exchanged to their reducing tile, then added (read two, write one).
    reduce_bytes = 2.0 * reduce_share * partials
    exchange = a_recv / a_rate + (b_recv + reduce_share * partials) / ctx.exchange_bytes_per_cycle
    steps = 1.0 + (pk > 1)
    return pn, amp, overhead, reduce_bytes, exchange, steps, a_recv + b_recv + partials


def _space_key(ctx: TileContext) -> TileContext:
    """The context with the memory proportion and the fitted constants neutralised: what a plan space depends on."""
    return replace(ctx, amp_proportion=0.0, amp_efficiency=1.0, vector_efficiency=1.0, compute_set_cycles=0.0,
                   sync_cycles=0.0)


@lru_cache(maxsize=4096)
def _plan_space(m: int, k: int, n: int, a_elems: float, b_elems: float, batch: int,
                key: TileContext) -> Tuple[np.ndarray, ...]:
    """Every candidate plan of a product (tile splits x serial steps along M or N), for ``_space_key`` contexts.
    Selecting from it for a memory proportion and a calibration is a few vector operations."""
    # Serialise along M (rows share the weights) or N (columns share the input); each way is a product of its own.
    ways = []
    serial = 1
    while serial <= MAX_SERIAL_SPLIT:
        for dim in ("m", "n") if serial > 1 else ("m",):
            sm, sn = (serial, 1) if dim == "m" else (1, serial)
            # Serial steps over M of a batched product take whole batches, and their right operands with them.
            batch_s = max(1, batch // sm)
            ways.append((serial, m / sm, n / sn, a_elems / sm, b_elems / sn / (batch / batch_s), batch_s))
        serial *= 2
    # Every (split_m, split_k) whose tiles exist and whose splits do not exceed M and K (in K's AMP grains).
    c = _candidates(key.compute_tiles)
    pm, pk = np.meshgrid(c, c, indexing="ij")
    pm, pk = pm.ravel(), pk.ravel()
    ok = (pm * pk <= key.compute_tiles) & (pk <= max(np.ceil(k / key.amp_grain), 1))
    pm, pk = pm[ok], pk[ok]
    fits = [np.flatnonzero(pm <= max(w[1], 1)) for w in ways]
    row = np.repeat(np.arange(len(ways)), [len(f) for f in fits])
    at = np.concatenate(fits)
    pm, pk = pm[at], pk[at]
    serial_, m_, n_, a_, b_, batch_ = (np.array(x)[row] for x in zip(*ways))
    pn, amp, over, red, exch, steps, temp = _evaluate(m_, k, n_, a_, b_, batch_, pm, pk, key)
    return (amp * serial_, over * serial_, red * serial_, exch * serial_, steps * serial_, temp, pm, pk, pn, serial_)


PRUNE_AFTER = 3
"""Times one product's plans are chosen from under one memory bound before the plans no calibration can pick are
set aside (``_fitting``): a fit or a planner asks thousands of times, a single run once or twice."""
_asked: Dict[Tuple[Any, ...], int] = {}


def _fitting(args: Tuple[Any, ...], cap: float) -> Any:
    """The plans of ``_plan_space(*args)`` whose temporary memory fits ``cap``, less those no calibration can choose,
    as (their indices, amp, over, red, exch, steps); None until asked ``PRUNE_AFTER`` times, or when none fits.

    A plan is set aside when an earlier fitting plan needs no more of any term of the time (AMP, overhead and
    reduction cycles, exchange cycles, supersteps): every term enters the time with a positive weight (one over the
    fitted efficiencies, the sync and compute-set cycles), so the earlier plan is at least as fast under any
    calibration, in floating point too (each operation is monotone), and ``argmin`` takes the first of equals. The
    choice is the one the whole space gives, to the bit."""
    key = (args, cap)
    n = _asked.get(key, 0) + 1
    if n < PRUNE_AFTER:
        if len(_asked) > 200_000:
            _asked.clear()
        _asked[key] = n
        return None
    return _pruned(args, cap)


@lru_cache(maxsize=4096)
def _pruned(args: Tuple[Any, ...], cap: float) -> Any:
    amp, over, red, exch, steps, temp = _plan_space(*args)[:6]
    idx = np.flatnonzero(temp <= cap)
    if not len(idx):
        return None
    terms = np.stack([amp[idx], over[idx], red[idx], exch[idx], steps[idx]])
    # Plans that dominate many others: the fastest under a spread of weightings, and the least of each term.
    rng = np.random.default_rng(0)
    keepers = {int(np.argmin(rng.lognormal(0.0, 2.0, 5) @ terms)) for _ in range(16)}
    keepers |= {int(np.argmin(row)) for row in terms}
    alive = np.ones(len(idx), dtype=bool)
    pos = np.arange(len(idx))
    for i in sorted(keepers):
        alive &= ~((terms >= terms[:, i:i + 1]).all(axis=0) & (pos > i))
    return (idx[alive], *(t[alive] for t in terms))


@lru_cache(maxsize=16384)
def plan_matmul(m: int, k: int, n: int, a_elems: float, b_elems: float, batch: int, ctx: TileContext) -> MatmulPlan:
    """Fastest partition of an [m,k] x [k,n] product whose operands hold ``a_elems`` and ``b_elems`` elements
    (a convolution's input is smaller than its im2col view; a batched product has ``batch`` right operands)
    whose temporary memory per tile fits the memory proportion, serialising the product if needed. When no plan
    fits, the planner drops the bound (IPU optimisation guide section 5.1) and takes the plan needing the least
    temporary memory."""
    args = (m, k, n, a_elems, b_elems, batch, _space_key(ctx))
    amp, over, red, exch, steps, temp, pm, pk, pn, serial = _plan_space(*args)
    fitting = _fitting(args, ctx.amp_proportion * ctx.tile_memory_bytes)
    if fitting is not None:
        idx, f_amp, f_over, f_red, f_exch, f_steps = fitting
        compute = f_amp / ctx.amp_efficiency + f_over + f_red / (VECTOR_BYTES_PER_CYCLE * ctx.vector_efficiency)
        exchange = f_exch + f_steps * (ctx.sync_cycles + ctx.compute_set_cycles)
        j = int(np.argmin(compute + exchange))
        i = int(idx[j])
        return MatmulPlan(int(pm[i]), int(pk[i]), int(pn[i]), int(serial[i]), float(compute[j]), float(exchange[j]),
                          float(temp[i]), True)
    compute = amp / ctx.amp_efficiency + over + red / (VECTOR_BYTES_PER_CYCLE * ctx.vector_efficiency)
    exchange = exch + steps * (ctx.sync_cycles + ctx.compute_set_cycles)
    total = compute + exchange
    fit = temp <= ctx.amp_proportion * ctx.tile_memory_bytes
    fits = bool(fit.any())
    i = int(np.argmin(np.where(fit, total, np.inf))) if fits else int(np.lexsort((total, temp))[0])
    return MatmulPlan(int(pm[i]), int(pk[i]), int(pn[i]), int(serial[i]), float(compute[i]), float(exchange[i]),
                      float(temp[i]), fits)


def matmul_operands(rec: OpRecord, m: int, k: int, n: int) -> Tuple[float, float, int, int]:
    """Elements of the two operands of one occurrence, how many right operands it has (batched products) and
    the number of [m,k,n] products it performs (a convolution's backward computes two)."""
    count = max(rec.count, 1)
    reads = rec.elements_read / count
    products = max(1, round(rec.flops / count / (2.0 * m * k * n))) if rec.flops else 1
    if rec.kind == "conv":
        b = float(k * n) * products  # weights (or their gradient's operands)
        a = max(reads - b, float(m))
    else:
        a = float(min(m * k, reads)) if reads else float(m * k)
        b = max(reads - a, float(k * n)) if reads else float(k * n)
    batch = max(1, min(m, round(b / (k * n))))
    return a / products, b / products, (1 if rec.kind == "conv" else batch), products


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
    return vector_op_cycles(rec, ctx)


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

