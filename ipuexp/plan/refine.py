"""After the search: the best candidates' per-IPU available memory proportion raised as far as it fits."""
from __future__ import annotations

from dataclasses import replace
from typing import Dict

from ipuexp.plan.candidate import Candidate
from ipuexp.plan.evaluate import Evaluator, Outcome
from ipuexp.plan.stats import SearchStats, count

REFINE_STEP = 0.01
"""Resolution of the per-IPU available memory proportion after the search (Graphcore's published values, such
as [0.14, 0.19, 0.19, 0.19], have two decimals)."""


def refine(evaluator: Evaluator, outcomes: Dict[Candidate, Outcome], stats: SearchStats, top: int) -> None:
    """Raise each IPU's available memory proportion of the ``top`` best fitting candidates, one IPU at a time,
    to the largest value (at ``REFINE_STEP``) that still fits, and keep it when the candidate gets faster. An
    IPU's proportion bounds only its own temporaries and the speed of its own matmuls (``emulator.matmul_plan``), so
    the IPUs are raised independently, as Graphcore's published per-IPU values are."""
    best = sorted((o for o in outcomes.values() if o.fits), key=lambda o: -o.score)[:top]
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
            if fit is not None and fit.score > current.score * (1 + 1e-9):
                current = fit
        seen.add(current.candidate)
