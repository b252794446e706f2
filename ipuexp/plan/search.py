"""Search the space: exhaustive when it is small, Optuna when it is large, then refine the best."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional

from ipuexp.plan import space as sp
from ipuexp.plan.candidate import Candidate
from ipuexp.plan.evaluate import Evaluator, Outcome
from ipuexp.plan.optuna_search import optuna_search
from ipuexp.plan.pool import Pool
from ipuexp.plan.refine import local_search, refine
from ipuexp.plan.stats import SearchStats, count, progress_bar, show_best

BATCH = 128
"""Candidates handed to the pool at a time (and asked of Optuna at a time)."""


@dataclass
class SearchResult:
    outcomes: Dict[Candidate, Outcome]
    stats: SearchStats
    recipe: Outcome
    trials: List[Any] = field(default_factory=list)


def exhaustive(problem: sp.Problem, pool: Pool, stats: SearchStats, outcomes: Dict[Candidate, Outcome],
               quiet: bool = False, limit: Optional[int] = None) -> None:
    """Every point of the space (the first ``limit`` ones with a limit)."""
    bar = progress_bar(min(stats.space_size, limit or stats.space_size), quiet)
    it = iter(sp.enumerate_all(problem))
    done = 0
    pending = None
    while True:
        batch = [c for c in _take(it, BATCH) if c not in outcomes]
        if pending is not None:
            for o in pending():
                outcomes[o.candidate] = o
                count(stats, o)
                bar.update(1)
            show_best(bar, outcomes)
        if not batch or (limit is not None and done >= limit):
            break
        done += len(batch)
        pending = pool.map_async(batch)
    bar.close()


def _take(it: Iterable[Candidate], n: int) -> List[Candidate]:
    out = []
    for c in it:
        out.append(c)
        if len(out) == n:
            break
    return out


def run(problem: sp.Problem, evaluator: Evaluator, method: str, trials: int, sampler: str, seed: int,
        workers: int, refine_top: int, quiet: bool = False, limit: Optional[int] = None) -> SearchResult:
    """Evaluate the recipe's own configuration, search, refine; every outcome is returned."""
    size = sp.size(problem)
    stats = SearchStats(method=method, space_size=size, workers=workers)
    outcomes: Dict[Candidate, Outcome] = {}
    t0 = time.perf_counter()
    recipe = evaluator.evaluate(problem.recipe)
    outcomes[problem.recipe] = recipe
    count(stats, recipe)
    pool = Pool(evaluator, workers)
    try:
        if method == "exhaustive":
            exhaustive(problem, pool, stats, outcomes, quiet=quiet, limit=limit)
        else:
            optuna_search(problem, pool, stats, outcomes, trials, sampler, seed, quiet=quiet)
        local_search(problem, pool, stats, outcomes)
    finally:
        pool.close()
    if refine_top:
        refine(evaluator, outcomes, stats, refine_top)
    stats.seconds = time.perf_counter() - t0
    return SearchResult(outcomes=outcomes, stats=stats, recipe=recipe)
