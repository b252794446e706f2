"""Every recipe's and calibration run's headline predictions, as JSON (``--save``) or against a saved table
(``--compare``): the check that a restructuring of the emulator left its numbers unchanged.

    python benchmarks/recipe_table.py --save before.json
    python benchmarks/recipe_table.py --compare before.json     # prints a before/after table, exit 1 on change
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Dict

from ipuexp.units import MIB  # IPU memory in binary units, as PopVision shows it

FIELDS = ("samples_per_s", "step_time_s", "bubble_fraction", "fits", "max_ipu_bytes", "max_tile_bytes")


def predictions() -> Dict[str, Dict[str, float]]:
    from ipuexp.runner.evaluation import evaluate
    from ipuexp.calibration import run_names
    from ipuexp.config.compose import compose_run, load_experiment
    from ipuexp.config.store import recipe_names

    exps = {name: load_experiment(f"+recipe={name}") for name in recipe_names()}
    exps.update({f"calibration/{name}": compose_run(name) for name in run_names()})
    out = {}
    for name, exp in exps.items():
        r = evaluate(exp).result
        out[name] = {"samples_per_s": r.throughput.samples_per_s, "step_time_s": r.throughput.step_time_s,
                     "bubble_fraction": r.throughput.bubble_fraction, "fits": float(bool(r.fits)),
                     "max_ipu_bytes": float(max(m.total_bytes for m in r.memory.ipus)),
                     "max_tile_bytes": float(max(m.max_tile_bytes for m in r.memory.ipus))}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save")
    parser.add_argument("--compare")
    args = parser.parse_args()
    now = predictions()
    if args.save:
        with open(args.save, "w") as f:
            json.dump(now, f, indent=1, sort_keys=True)
    if not args.compare:
        print(json.dumps(now, indent=1, sort_keys=True))
        return 0
    with open(args.compare) as f:
        before = json.load(f)
    changed = 0
    print("| run | samples/s before | after | change | max IPU MiB before | after | fullest tile B before | after |")
    print("|---|---|---|---|---|---|---|---|")
    for name in sorted(set(before) | set(now)):
        b, a = before.get(name), now.get(name)
        if b is None or a is None:
            print(f"| {name} | {'-' if b is None else 'present'} | {'-' if a is None else 'present'} | | | | | |")
            changed += 1
            continue
        same = all(abs(a[k] - b[k]) <= 1e-9 * max(1.0, abs(b[k])) for k in FIELDS)
        changed += not same
        rel = 100 * (a["samples_per_s"] / b["samples_per_s"] - 1)
        print(f"| {name} | {b['samples_per_s']:,.1f} | {a['samples_per_s']:,.1f} | {rel:+.2f}% | "
              f"{b['max_ipu_bytes'] / MIB:,.1f} | {a['max_ipu_bytes'] / MIB:,.1f} | {b['max_tile_bytes']:,.0f} | "
              f"{a['max_tile_bytes']:,.0f} |")
    print(f"\n{changed} of {len(set(before) | set(now))} runs changed")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
