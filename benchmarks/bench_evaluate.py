"""Evaluation speed: one configuration of a captured model through the engine (throughput and memory).

BERT-Large on an IPU-POD16 (recipe ``bert_large``) is captured once, then a sweep of configurations
(gradient accumulation x available memory proportion x IO tiles x schedule x partials type: 120 points) is
evaluated the way a sweep job does: ``estimate_throughput`` and ``estimate_memory`` per point, matmul plans
shared through the engine's caches. Target: median under 5 ms per configuration. The first point pays the
matmul planning of the model (also reported). Exit status 1 when the target is missed.
"""
from __future__ import annotations

import argparse
import copy
import itertools
import os
import statistics
import sys
import time

TARGET_MS = 5.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="bert_large")
    args = parser.parse_args()

    from ipuexp.config.schema import PartialsType, Schedule
    from ipuexp.execution.execution import build_plan
    from ipuexp.emulator.timing import estimate_throughput
    from ipuexp.graph.capture import capture
    from ipuexp.graph.stages import assign_stages
    from ipuexp.config.compose import compose_recipe as compose

    from ipuexp.emulator.memory import estimate_memory

    base = compose(args.recipe)
    t0 = time.perf_counter()
    graph = capture(base.model, base.data.micro_batch_size)
    t_capture = time.perf_counter() - t0
    p = base.options.pipeline
    stages = assign_stages(graph.blocks, p.layers_per_ipu, p.device_mapping)

    grid = list(itertools.product((16, 64, 256, 1024, 2048), (0.1, 0.2, 0.3), (0, 64),
                                  (Schedule.grouped, Schedule.interleaved), (PartialsType.half, PartialsType.float)))
    times = []
    sps = []
    for ga, amp, io_tiles, schedule, partials in grid:
        exp = copy.deepcopy(base)
        exp.options.gradient_accumulation = ga
        exp.options.available_memory_proportion = amp
        exp.options.io.num_io_tiles = io_tiles
        exp.options.pipeline.schedule = schedule
        exp.options.partials_type = partials
        t = time.perf_counter()
        plan = build_plan(exp, stages)  # built once per configuration, as a job does
        f = estimate_throughput(plan, graph)
        estimate_memory(plan, graph)
        times.append((time.perf_counter() - t) * 1e3)
        sps.append(f.samples_per_s)

    median = statistics.median(times)
    p95 = sorted(times)[int(0.95 * (len(times) - 1))]
    ok = median <= TARGET_MS
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"{args.recipe}: {len(graph.blocks)} blocks, {len(stages)} stages, capture/cache load {t_capture:.2f} s; "
          "memory model included")
    print(f"{len(grid)} configurations: first {times[0]:.1f} ms (plans the model's matmuls), median {median:.2f} ms, "
          f"p95 {p95:.2f} ms, max {max(times):.1f} ms (target median <= {TARGET_MS:.0f} ms: "
          f"{'PASS' if ok else 'FAIL'})")
    print(f"predicted samples/s over the sweep: {min(sps):,.0f} to {max(sps):,.0f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
