"""The matmul/convolution planner: the tile partition of one product, chosen like PopLibs' planner.

Split M, K, N over the compute tiles; the operands each tile needs are received over the exchange at
``exchange_bytes_per_cycle`` per tile, as PopLibs' ``ExchangeEstimator`` counts them; partials split over K are
reduced in a second superstep. The plan must fit the ``availableMemoryProportion`` share of tile memory, otherwise
the operation is serialised into steps; when nothing fits, the planner drops the proportion and takes the plan
needing the least memory (IPU optimisation guide sections 4.1 and 5.1). Plans are cached per shape and tile
context, so a sweep re-plans nothing; the caches hold pure functions of immutable arguments. AMP compute runs at
the precision's rate; half partials double it and halve the partials' memory (IPU optimisation guide section 5.2).
Each pass of the AMP vertex over one input- and one output-channel group of a tile adds PopLibs' fixed worker and
supervisor cycles, so few rows per tile cost more than their multiply-accumulates.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Dict, Tuple

import numpy as np

from ipuexp.execution.hardware import TileContext
from ipuexp.emulator.vector_rate import VECTOR_BYTES_PER_CYCLE
from ipuexp.graph.types import OpRecord

MAX_SERIAL_SPLIT = 64
"""Largest number of serial steps a plan may take to fit the memory proportion."""

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

