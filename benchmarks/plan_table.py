"""Published configuration against the planner's choice, for every user recipe at its published size and on an
IPU-POD64: throughput, fullest-tile headroom, what changed.

On an IPU-POD64 a recipe's ``_pod64`` variant is used where there is one; otherwise the recipe's replicas are
scaled to fill the 64 IPUs, with the gradient accumulation divided by the same factor where it divides (the
global batch kept, as Graphcore's POD64 configurations do), else kept. The recipe's own configuration is the
first candidate the planner evaluates, so its best is never slower when the recipe fits with the headroom: the
exit status is 1 when it is. Prints a Markdown table; the search's figures per row go to stderr.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import List, Tuple

POD64 = 64


def pod64_overrides(base) -> List[str]:
    """Overrides running a recipe made for a smaller system on an IPU-POD64."""
    from ipuexp.config.pipeline import ipus_per_replica

    p = base.options.pipeline
    per_replica = ipus_per_replica(p.layers_per_ipu or [], p.device_mapping)
    replicas = int(base.options.replication_factor)
    scale = POD64 // (per_replica * replicas)
    out = ["system=pod64"]
    if scale > 1:
        out.append(f"options.replication_factor={replicas * scale}")
        ga = int(base.options.gradient_accumulation)
        if ga % scale == 0:
            out.append(f"options.gradient_accumulation={ga // scale}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--recipes", nargs="*")
    args = parser.parse_args()

    from ipuexp.config.compose import compose_recipe
    from ipuexp.config.store import recipe_names
    from ipuexp.plan.candidate import differences
    from ipuexp.plan.output import distinct
    from ipuexp.plan.planner import plan
    from ipuexp.plan.settings import PlanConfig

    names = args.recipes or [n for n in recipe_names() if not n.endswith("_pod64")]
    print("| recipe | system | recipe samples/s | tile free | planner samples/s | tile free | speed-up | "
          "what changed |")
    print("|---|---|---|---|---|---|---|---|")
    bad = 0
    t_all = time.perf_counter()
    for name in names:
        runs: List[Tuple[str, List[str]]] = [(name, [])]
        if f"{name}_pod64" in recipe_names():
            runs.append((f"{name}_pod64", []))
        else:
            runs.append((name, pod64_overrides(compose_recipe(name))))
        for recipe, overrides in runs:
            base = compose_recipe(recipe, overrides)
            t0 = time.perf_counter()
            p = plan(base, PlanConfig(trials=args.trials), quiet=True)
            st = p.result.stats
            print(f"{recipe} {' '.join(overrides)}: {st.method} search, {st.candidates:,} candidates in "
                  f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
            r, best = p.result.recipe, p.best
            label = f"`{recipe}`" + (f" {' '.join(o.replace('options.', '') for o in overrides)}"
                                     if overrides else "")
            if best is None:
                print(f"| {label} | {base.system.name} | {r.samples_per_s:,.0f} | - | nothing fits | | | |")
                continue
            best = distinct(p.ranked, 1, p.problem.recipe)[0]
            own = f"{r.samples_per_s:,.0f}" + ("" if r.fits else " (does not fit)")
            changes = " ".join(differences(best.candidate, p.problem.recipe)).replace("options.", "")
            print(f"| {label} | {base.system.name} | {own} | {r.tile_headroom:.0%} | {best.samples_per_s:,.0f} | "
                  f"{best.tile_headroom:.0%} | {best.samples_per_s / r.samples_per_s:.2f}x | {changes or '-'} |",
                  flush=True)
            bad += r.fits and best.samples_per_s < r.samples_per_s
    print(f"all: {time.perf_counter() - t_all:.0f} s, {args.trials} trials per search", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
