"""Depthwise convolutions (one output channel per group: ConvNeXt's 7x7 layers) as PopLibs runs them.

The AMP computes 16 output channels of a group at once (its conv units), so a group with one output channel would
use one unit in 16. PopLibs' convolution planner (``lib/poplin/ConvPlan.cpp``) then picks the vertical-MAC method
built for grouped convolutions with one channel per group: ``ConvPartialVerticalMac`` on the workers' vector unit,
8 groups at a time with half partials, 4 with float partials. Its cycle estimate (``lib/poplin/
PerformanceEstimation.hpp``, ``getConvPartialVerticalMacCycleEstimate`` and ``getVerticalMacDotProductCycles``)
per output position and group of channels: 7 cycles of partition loop, 15 (half) or 5 (float) to store and reload
the accumulators, and a dot product over the K kernel elements of 3 + 3 (K - 1) cycles for 8 groups, or
3 + 2 (K - 1) for 4. Those are worker cycles; the six workers share the tile, so a tile spends as many cycles as
the worker cycles of its share. Like every vertex estimate off the AMP it is reached at the fitted
``vector_efficiency``; the operands and results cross the exchange once, and the product is one superstep (two for
the backward's two gradients).
"""
from __future__ import annotations

from typing import Tuple

from ipuexp.execution.hardware import TileContext


def vmac_cycles(m: int, k: int, products: int, operand_elements: float, ctx: TileContext) -> Tuple[float, float]:
    """(compute, exchange and sync) cycles of ``products`` depthwise products of ``m`` outputs (positions x
    groups) over ``k`` kernel elements, their operands ``operand_elements`` per product."""
    half_partials = ctx.partial_bytes == 2
    groups_per_pass = 8 if half_partials else 4
    per_pass = 7 + (15 if half_partials else 5) + 3 + (3 if half_partials else 2) * (k - 1)
    passes = -(-m // groups_per_pass)
    compute = products * passes * per_pass / (ctx.compute_tiles * ctx.vector_efficiency)
    moved = products * (operand_elements + m) * ctx.activation_bytes
    exchange = moved / (ctx.compute_tiles * ctx.exchange_bytes_per_cycle)
    return compute, exchange + products * (ctx.sync_cycles + ctx.compute_set_cycles)
