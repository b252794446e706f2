"""The rate of a tile's vector passes, which both the non-matmul ops (``emulator.cost``) and the reduction of a
matmul's partials (``emulator.matmul_plan``) run at."""
from __future__ import annotations

VECTOR_BYTES_PER_CYCLE = 8.0
"""Bytes a tile moves per cycle in a vectorised fp16 pass that reads two operands and writes one (PopLibs
``PerformanceEstimation.cpp``, ``getScaledArithmeticSupervisorCycleEstimate`` half/half: 3 worker cycles per 64-bit
vector of 4 halves, 6 workers time-sliced, so 0.75 tile cycles per element, 24 bytes per 3 cycles). The
47.5 TB/s load/store peak (24.3 B/cycle/tile, one cycle a vector) needs interleaved memory that compiled vertices
rarely reach (Jia et al. 2019: compiler-generated loops reach about 1/4 of the load-bandwidth peak)."""
