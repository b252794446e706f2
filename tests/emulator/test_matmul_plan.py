"""The matmul planner: plans bounded by the memory proportion, serialised when little is left, cached per context."""
from __future__ import annotations

from dataclasses import replace

from ipuexp.emulator.matmul_plan import plan_matmul
from tests.emulator.test_cost import context


def test_plan_respects_the_available_memory_proportion():
    for amp in (0.05, 0.1, 0.3, 0.6):
        ctx = context(amp)
        plan = plan_matmul(4096, 1024, 4096, 4096 * 1024, 1024 * 4096, 1, ctx)
        assert plan.fits
        assert plan.temp_bytes_per_tile <= amp * ctx.tile_memory_bytes
        assert plan.split_m * plan.split_k * plan.split_n <= ctx.compute_tiles


def test_more_memory_proportion_never_slows_a_matmul_and_little_serialises_it():
    # Seed 001 4.1: serialised matmuls run in fewer cycles when more temporary memory is available.
    cycles = [plan_matmul(8192, 4096, 8192, 8192 * 4096, 4096 * 8192, 1, context(a)).cycles
              for a in (0.02, 0.05, 0.1, 0.2, 0.4, 0.8)]
    assert cycles == sorted(cycles, reverse=True)
    assert cycles[0] > 1.2 * cycles[-1]
    assert plan_matmul(8192, 4096, 8192, 8192 * 4096, 4096 * 8192, 1, context(0.02)).serial > 1


def test_plans_are_cached_per_context():
    ctx = context()
    a = plan_matmul(1024, 1024, 1024, 1 << 20, 1 << 20, 1, ctx)
    assert plan_matmul(1024, 1024, 1024, 1 << 20, 1 << 20, 1, ctx) is a
    assert plan_matmul(1024, 1024, 1024, 1 << 20, 1 << 20, 1, replace(ctx, amp_proportion=0.1)) is not a
