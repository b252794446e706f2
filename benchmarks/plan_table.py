"""Published configuration against the planner's choice, for every user recipe at its published size and on an
IPU-POD64: throughput, fullest-tile headroom, what changed. Prints a Markdown table; exit status 1 when the
planner's best is slower than the recipe's own prediction for a recipe whose own configuration fits."""
from __future__ import annotations

import argparse
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--recipes", nargs="*")
    args = parser.parse_args()

    from ipuexp.config.compose import compose_recipe
    from ipuexp.config.store import recipe_names
    from ipuexp.plan.output import distinct
    from ipuexp.plan.planner import plan
    from ipuexp.plan.settings import PlanConfig
    from ipuexp.plan import space as sp

    names = args.recipes or [n for n in recipe_names() if not n.endswith("_pod64")]
    print("| recipe | system | published samples/s | tile free | planner samples/s | tile free | speed-up | "
          "what changed |")
    print("|---|---|---|---|---|---|---|---|")
    bad = 0
    for name in names:
        runs = [(name, [])]
        runs.append((f"{name}_pod64", []) if f"{name}_pod64" in recipe_names() else (name, ["system=pod64"]))
        for recipe, overrides in runs:
            base = compose_recipe(recipe, overrides)
            p = plan(base, PlanConfig(trials=args.trials), quiet=True)
            r, best = p.result.recipe, p.best
            if best is None:
                print(f"| `{recipe}` | {base.system.name} | {r.samples_per_s:,.0f} | - | nothing fits | | | |")
                continue
            best = distinct(p.ranked, 1, p.problem.recipe)[0]
            own = f"{r.samples_per_s:,.0f}" + ("" if r.fits else " (does not fit)")
            changes = " ".join(sp.differences(best.candidate, p.problem.recipe)).replace("options.", "")
            print(f"| `{recipe}`{' ' + ' '.join(overrides) if overrides else ''} | {base.system.name} | {own} | "
                  f"{r.tile_headroom:.0%} | {best.samples_per_s:,.0f} | {best.tile_headroom:.0%} | "
                  f"{best.samples_per_s / r.samples_per_s:.2f}x | {changes or '-'} |", flush=True)
            bad += r.fits and best.samples_per_s < r.samples_per_s
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
