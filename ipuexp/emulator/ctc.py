"""Cycles of a CTC loss (speech recognition), as PopLibs' ``popnn::ctc`` plans and estimates it.

PopTorch runs ``ctc_loss`` as ``popnn::ctc::calcLossAndGradientLogProbabilities``: the loss and the gradient of the
log probabilities in one operation of the forward pass (the backward only scales that gradient). It is a recurrence
over the frames, not a product: the alpha recursion runs forward in time and the beta recursion backward, one
compute set, exchange and sync per frame step, each tile holding a piece of the batch, of the frames and of the
extended label. PopLibs' planner (``lib/popnn/CTCLossPlan.cpp``: ``plan`` minimises ``estimateCycles`` over the
parallel partitions of batch, time and label within the IPU's tiles) is modelled here with its own estimates:

- alpha and beta from both ends at once: ``ceil(T / Pt) x (Pt rounded up to even) / 2`` steps, and as many steps of
  the gradient given alpha or beta;
- per step, each label symbol with its adjacent blank costs ``alphaCycles`` = 8 reads and writes + 2 log-adds of 16
  cycles + 2 log-multiplies of 1 + 2 of control flow = 44 worker cycles (``gradGivenAlphaCycles`` 44 + 6 + 2 x 17 =
  84), times the 6 worker slots, for the ``ceil(L / Pl)`` symbols of a tile (``lib/popnn/PerformanceEstimation.hpp``);
- a fixed 100 cycles of exchange per step plus the elements exchanged with neighbouring partitions, and 90 of sync;
- one worker per batch entry: ``ceil(ceil(B / Pb) / 6)`` serial vertex executions per step.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Tuple

LOG_ADD = 4 + 1 + 3 + 1 + 6 + 1
"""PerformanceEstimation.hpp logAddCycles: min/max, subtract, exp, add one, log, add."""
LOG_MUL = 1
ALPHA_PER_SYMBOL = (1 + 3) * 2 + 2 * LOG_ADD + 2 * LOG_MUL + 2
"""Worker cycles per label symbol and frame of the alpha (and beta) vertex: 44."""
GRAD_PER_SYMBOL = ALPHA_PER_SYMBOL + (2 + 1) * 2 + (LOG_MUL + LOG_ADD) * 2
"""Worker cycles per label symbol and frame of the gradient given alpha (or beta) vertex: 84."""
EXCHANGE_FIXED, SYNC = 100, 90
"""CTCLossPlan.cpp estimateCycles: fixed exchange overhead and sync cycles of each step."""


def _candidates(n: int) -> Tuple[int, ...]:
    """Partition counts worth trying for a dimension of ``n``: every count giving a distinct piece size."""
    return tuple(sorted({math.ceil(n / math.ceil(n / p)) for p in range(1, n + 1)}))


@lru_cache(maxsize=1024)
def ctc_cycles(frames: int, batch: int, labels: int, tiles: int, workers: int, exchange_bytes_per_cycle: float,
               partial_bytes: int = 4) -> Tuple[float, float]:
    """(compute, exchange and sync) cycles of the cheapest plan for ``batch`` sequences of ``frames`` frames and
    ``labels`` label symbols on ``tiles`` tiles."""
    best: Tuple[float, float] = (math.inf, math.inf)
    for pb in _candidates(batch):
        for pt in (1, 2, 4, 8, 16):
            if pt > frames:
                break
            for pl in _candidates(labels):
                if pb * pt * pl > tiles:
                    break
                cost = _plan_cycles(frames, batch, labels, pb, pt, pl, workers, exchange_bytes_per_cycle,
                                    partial_bytes)
                if sum(cost) < sum(best):
                    best = cost
    return best


def _plan_cycles(frames: int, batch: int, labels: int, pb: int, pt: int, pl: int, workers: int,
                 exchange_bytes_per_cycle: float, partial_bytes: int) -> Tuple[float, float]:
    steps = math.ceil(frames / pt) * (pt + (pt & 1)) // 2
    symbols = math.ceil(labels / pl)
    serial = math.ceil(math.ceil(batch / pb) / workers)
    alpha_elements = (symbols if pt > 2 else 0) + (2 if pl > 1 else 0) + (2 if pl > 1 and pt > 2 else 0)
    grad_elements = 2 + 2 * (2 * symbols)
    compute = steps * serial * workers * symbols * (ALPHA_PER_SYMBOL + GRAD_PER_SYMBOL)
    exchange = steps * serial * (2 * EXCHANGE_FIXED + 2 * SYNC + (alpha_elements + grad_elements) * partial_bytes
                                 / exchange_bytes_per_cycle)
    return float(compute), float(exchange)
