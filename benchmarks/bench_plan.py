"""Planner speed: candidate configurations of BERT-Large on an IPU-POD64 evaluated per second.

The planner searches recipe ``bert_large_pod64`` (Optuna NSGA-II over the structure, every value of the inner
dimensions per structure, then a coordinate search and the per-IPU AMP refinement) until ``--trials`` distinct
candidates are done. Graph capture (one per micro-batch size, from the cache when warm) and importing Optuna are
timed apart. A candidate counts when the full memory model (and timing) evaluated it, or when the memory lower
bound rejected it; the two are reported apart. Target: at least 10,000 candidates in at most 60 s. Exit status 1
when it is missed. ``--workers 2`` measures the same search in two forked processes.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

TARGET_CANDIDATES, TARGET_S = 10_000, 60.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="bert_large_pod64")
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=1, help="0: one per core")
    args = parser.parse_args()

    t0 = time.perf_counter()
    import optuna  # noqa: F401  (its import is start-up, not search)
    t_import = time.perf_counter() - t0

    from ipuexp.config.compose import compose_recipe
    from ipuexp.plan.planner import plan
    from ipuexp.plan.settings import PlanConfig

    base = compose_recipe(args.recipe)
    p = plan(base, PlanConfig(trials=args.trials, workers=args.workers), quiet=True)
    st = p.result.stats
    best = p.best
    ok = st.candidates >= TARGET_CANDIDATES and st.seconds <= TARGET_S
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; {st.workers} worker processes")
    print(f"{args.recipe}: space of {st.space_size:,} points; import optuna {t_import:.1f} s, graph capture of "
          f"{len(p.micro_batches)} micro-batch sizes {p.capture_s:.1f} s (not counted)")
    print(f"{st.candidates:,} candidates in {st.seconds:.1f} s ({st.candidates / st.seconds:,.0f}/s): "
          f"{st.evaluated:,} fully evaluated (memory model and timing), {st.pruned:,} rejected by the memory lower "
          f"bound; {st.invalid:,} rejected by the config rules and {st.repeats:,} repeated proposals not counted")
    print(f"recipe {p.result.recipe.samples_per_s:,.0f} samples/s; best that fits "
          f"{best.samples_per_s if best else 0:,.0f} samples/s")
    print(f"target >= {TARGET_CANDIDATES:,} candidates in <= {TARGET_S:.0f} s: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
