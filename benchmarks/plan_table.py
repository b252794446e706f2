"""The planner against the recipes: every user recipe on an IPU-POD16, POD64 and POD256, planned with three seeds.

For each recipe and system the table gives the recipe as published (on a larger system it uses only its own IPUs),
the recipe scaled to the system by data parallelism (more replicas, the gradient accumulation divided by the same
factor, the global batch kept; "-" when that is not a valid configuration), the planner's best with seeds 0, 1
and 2, how far the three seeds are apart against the best's error band, the best's lower end of the band against
the baseline's, how far the best is from the calibration evidence (the nearest row, or "extrapolated"), and what the
best changes. The planner ranks by the lower end of the band (``plan.rank=lower``), so the comparison with the
baseline is made there. The exit status is 1 when the planner's best is below the recipe or its scaled form at the
lower end of the band where they fit, or when the seeds disagree by more than the error band. Prints a Markdown
table; the search's figures per plan go to stderr.
"""
from __future__ import annotations

import argparse
import sys
import time

SYSTEMS = ("pod16", "pod64", "pod256")
SEEDS = (0, 1, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--recipes", nargs="*")
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS))
    args = parser.parse_args()

    from ipuexp.config.compose import compose_recipe
    from ipuexp.config.errors import ConfigError
    from ipuexp.config.store import recipe_names
    from ipuexp.plan.candidate import differences
    from ipuexp.plan.output import distinct
    from ipuexp.plan.planner import plan
    from ipuexp.plan.settings import PlanConfig

    names = args.recipes or [n for n in recipe_names() if not n.endswith("_pod64")]
    print("| recipe | system | recipe | scaled | planner (seeds 0 / 1 / 2) | seeds apart | band | speed-up | "
          "at worst | evidence | what the best changes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    bad = 0
    t_all = time.perf_counter()
    for name in names:
        for system in args.systems:
            plans = []
            for seed in SEEDS:
                t0 = time.perf_counter()
                try:
                    p = plan(compose_recipe(name, [f"system={system}"]), PlanConfig(trials=args.trials, seed=seed),
                             quiet=True)
                except ConfigError as err:  # the global batch cannot be split over this many IPUs
                    print(f"{name} {system}: {err}", file=sys.stderr)
                    break
                st = p.result.stats
                print(f"{name} {system} seed {seed}: {st.candidates:,} candidates in {time.perf_counter() - t0:.1f} s"
                      f", sampler's late gain {st.late_gain():.1%}", file=sys.stderr, flush=True)
                plans.append(p)
            if not plans:
                print(f"| `{name}` | {system} | | | global batch not divisible over {system} | | | | | | |",
                      flush=True)
                continue
            p = plans[0]
            r, s = p.result.recipe, p.result.scaled
            own = f"{r.samples_per_s:,.0f}" + ("" if r.fits else " (does not fit)")
            scaled = "-" if s is None else f"{s.samples_per_s:,.0f}" + ("" if s.fits else " (does not fit)")
            if any(q.best is None for q in plans):
                print(f"| `{name}` | {system} | {own} | {scaled} | nothing fits | | | | | | |", flush=True)
                continue
            bests = [q.best.samples_per_s for q in plans]
            apart = max(bests) / min(bests) - 1.0
            best = distinct(p.ranked, 1, p.problem.recipe)[0]
            band = best.band_pct or 0.0
            fitting = [o for o in (r, s) if o is not None and o.fits]
            baseline = max([o.samples_per_s for o in fitting], default=0.0)
            base_low = max([o.score for o in fitting], default=0.0)
            changes = " ".join(differences(best.candidate, p.problem.recipe)).replace("options.", "")
            speedup = f"{best.samples_per_s / baseline:.2f}x" if baseline else "-"
            worst = f"{best.score / base_low:.2f}x" if base_low else "-"
            if best.extrapolated:
                evidence = f"extrapolated: {best.extrapolated}"
            elif best.nearest:
                evidence = f"{best.nearest[0]} ({best.nearest[1]:.1f})"
            else:
                evidence = "-"
            print(f"| `{name}` | {system} | {own} | {scaled} | {' / '.join(f'{b:,.0f}' for b in bests)} | "
                  f"{apart:.1%} | ±{band:.0f}% | {speedup} | {worst} | {evidence} | {changes or '-'} |", flush=True)
            scores = [q.best.score for q in plans]
            bad += min(scores) < base_low * (1 - 1e-9) or apart * 100 > band
    print(f"all: {time.perf_counter() - t_all:.0f} s, {args.trials} trials per search", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
