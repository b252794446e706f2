"""After the search: a coordinate search from the fastest candidate, then the best candidates' per-IPU
available memory proportion raised as far as it fits."""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, List

from ipuexp.plan import space as sp
from ipuexp.plan.candidate import Candidate
from ipuexp.plan.evaluate import Evaluator, Outcome
from ipuexp.plan.pool import Pool
from ipuexp.plan.ranking import ranked
from ipuexp.plan.stats import SearchStats, count

REFINE_STEP = 0.01
"""Resolution of the per-IPU available memory proportion after the search (Graphcore's published values, such
as [0.14, 0.19, 0.19, 0.19], have two decimals)."""


def refine(evaluator: Evaluator, outcomes: Dict[Candidate, Outcome], stats: SearchStats, top: int) -> None:
    """Raise each IPU's available memory proportion of the ``top`` best fitting candidates, one IPU at a time,
    to the largest value (at ``REFINE_STEP``) that still fits, and keep it when the candidate gets faster. An
    IPU's proportion bounds only its own temporaries and the speed of its own matmuls (``emulator.cost``), so
    the IPUs are raised independently, as Graphcore's published per-IPU values are."""
    best = sorted((o for o in outcomes.values() if o.fits), key=lambda o: -o.samples_per_s)[:top]
    seen = set()
    for o in best:
        current = o
        for i in range(len(o.candidate.amp)):
            lo = current.candidate.amp[i]
            grid = [round(lo + REFINE_STEP * k, 2) for k in range(1, int(round((1.0 - lo) / REFINE_STEP)) + 1)]
            fit = None
            left, right = 0, len(grid) - 1
            while left <= right:  # largest proportion that fits
                mid = (left + right) // 2
                cand = replace(current.candidate, amp=tuple(
                    grid[mid] if j == i else a for j, a in enumerate(current.candidate.amp)))
                res = outcomes.get(cand)
                if res is None:
                    res = evaluator.evaluate(cand)
                    outcomes[cand] = res
                    count(stats, res)
                    stats.refined += 1
                if res.fits:
                    fit, left = res, mid + 1
                else:
                    right = mid - 1
            if fit is not None and fit.samples_per_s > current.samples_per_s * (1 + 1e-9):
                current = fit
        seen.add(current.candidate)


def local_search(problem: sp.Problem, pool: Pool, stats: SearchStats, outcomes: Dict[Candidate, Outcome],
                 rounds: int = 3) -> None:
    """Coordinate search from the fastest fitting candidate: every value of one dimension at a time (layouts
    included), move to the fastest that fits, repeat until nothing improves."""
    layouts = sp.layouts(problem)
    fixed_amp = problem.recipe.amp if "amp" in problem.fixed else None
    for _ in range(rounds):
        best = ranked(outcomes)
        if not best:
            return
        b = best[0].candidate
        values = {"schedule": b.schedule, "partials": b.partials, "recompute": b.recompute,
                  "device_iterations": b.device_iterations, "instances": b.instances,
                  "optimizer_state": b.optimizer_state, "weights_on_chip": b.weights_on_chip,
                  "io_tiles": b.io_tiles, "prefetch": b.prefetch, "amp0": b.amp[0], "amp": b.amp[-1],
                  "batching": (b.micro_batch, b.grad_accum)}
        batch: List[Candidate] = []
        for lay, r in layouts:
            dims = sp.dimensions(problem, lay, r)
            if not dims["batching"]:  # no micro-batch makes the global batch with these replicas
                continue
            if lay != b.layout:  # another layout with the best's values where it offers them
                v = {k: (values[k] if values[k] in dims[k] else dims[k][0]) for k in dims if k in values}
                if dims["amp"] == (None,):
                    v["amp"] = None
                batch.append(sp.build(lay, r, v, fixed_amp))
                continue
            for name, choices in dims.items():
                for choice in choices:
                    v = dict(values, **{name: choice})
                    if dims["amp"] == (None,):
                        v["amp"] = None
                    batch.append(sp.build(lay, r, v, fixed_amp if name != "amp" else None))
        fresh = list(dict.fromkeys(c for c in batch if c not in outcomes))
        for o in pool.map_async(fresh)():
            outcomes[o.candidate] = o
            count(stats, o)
        if ranked(outcomes)[0].candidate == b:
            return
