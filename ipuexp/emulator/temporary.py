"""Temporary (not-always-live) memory of one matmul or convolution: that of the plan the PopLibs planner picks.

IPU optimisation guide section 5.1 / PopLibs ``availableMemoryProportion``: the planner bounds the temporary
memory of a product (operand copies each tile receives, partial sums; PopLibs: "amount of memory allocated for
use for temporary data whilst the operation is executing") by that proportion of tile memory.
The bound is an upper bound, not what a product uses: the planner minimises cycles among the plans within it
(graphcore/poplibs ``lib/poplin/PlanningObjective.hpp``: ``minimizeCycles``, ties broken by temporary bytes),
and the fastest plan may need far less. When no plan fits, the planner serialises the product, and when even
that fails it drops the bound and takes the plan needing the least memory (IPU optimisation guide section 5.1).

That planner is modelled once, for cycles and memory alike, in ``emulator.matmul_plan.plan_matmul``: every split of
M, K and N over the compute tiles (and serial steps), with the bytes each tile receives, its partials and the
cycles of compute, exchange and partial reduction. The temporary memory here is the chosen plan's, so the time
and the memory of an operation always describe the same plan. IPU optimisation guide section 5.2: half partials
halve the partials (``TileContext.partial_bytes``).

``embedding_serialization_factor`` (PopTorch ``serializedMatMul``, TF ``serialized_matmul``) splits the products
with the tied vocabulary table into pieces along the vocabulary before planning; the pieces run one after the
other, so one piece's plan is live at a time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Temporary:
    """Planned temporary memory of one product."""

    bytes: int
    """Temporary bytes over all compute tiles of the IPU while the product (one serial step) runs."""
    serial_pieces: int
    """Serial steps the planner splits the product into to stay within the bound (1: none)."""
    fits: bool = True
    """False when no plan fits the bound (the planner then takes the plan needing the least memory)."""


def vocabulary_split(shape: Any, a: float, b: float, table_elements: int, pieces: int) -> tuple:
    """([m, k, n], a, b) of one piece of a product with the vocabulary table split into ``pieces``.

    The table is the operand (or result) whose elements equal ``table_elements``; the vocabulary is its longer
    side (30,400 or 50,257 rows against a hidden size of 768 to 1,600 in the zoo). The left operand holds M x K
    and the right one K x N elements, so each shrinks with the piece when it holds the split dimension.
    """
    m, k, n = shape
    dims = {"m": m, "k": k, "n": n}
    if pieces <= 1 or not table_elements:
        return [m, k, n], a, b
    if k * n == table_elements:
        split = "k" if k >= n else "n"
    elif m * n == table_elements:
        split = "m" if m >= n else "n"
    elif m * k == table_elements:
        split = "m" if m >= k else "k"
    else:
        return [m, k, n], a, b
    dims[split] = max(1, dims[split] // pieces)
    a = a / pieces if split in ("m", "k") else a
    b = b / pieces if split in ("k", "n") else b
    return [dims["m"], dims["k"], dims["n"]], a, b


def matmul_temporary(record: Any, ctx: Any, table_elements: int = 0, pieces: int = 1) -> Temporary:
    """Temporary memory of one occurrence of a captured matmul/convolution record on the IPU ``ctx``
    (an ``plan.hardware.TileContext``), under the plan ``emulator.matmul_plan.plan_matmul`` chooses."""
    from ipuexp.emulator.matmul_plan import matmul_operands, plan_matmul

    m, k, n = (max(int(x), 1) for x in record.matmul_shape)
    a, b, batch, _products = matmul_operands(record, m, k, n)
    (m, k, n), a, b = vocabulary_split([m, k, n], a, b, table_elements, pieces)
    plan = plan_matmul(m, k, n, round(a), round(b), batch, ctx)
    return Temporary(bytes=int(plan.temp_bytes_per_tile * ctx.compute_tiles), serial_pieces=plan.serial,
                     fits=plan.fits)
