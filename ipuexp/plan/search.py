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
from ipuexp.plan.climb import climb, evaluate_all, score
from ipuexp.plan.ranking import ranked
from ipuexp.plan.refine import refine
from ipuexp.plan.seeds import scaled_recipe, seeds
from ipuexp.plan.stats import SearchStats, count, progress_bar, show_best

BATCH = 128
"""Candidates handed to the pool at a time (and asked of Optuna at a time)."""
FINISH_STARTS = 3
"""Structures the last climbs start from (the fastest candidate of each of the fastest few)."""


@dataclass
class SearchResult:
    outcomes: Dict[Candidate, Outcome]
    stats: SearchStats
    recipe: Outcome
    scaled: Optional[Outcome] = None
    """The recipe scaled to the system by data parallelism (None when it already fills the system)."""
    trials: List[Any] = field(default_factory=list)


def exhaustive(problem: sp.Problem, pool: Pool, stats: SearchStats, outcomes: Dict[Candidate, Outcome],
               bar: Any, limit: Optional[int] = None) -> None:
    """Every point of the space (the first ``limit`` ones with a limit)."""
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


def _take(it: Iterable[Candidate], n: int) -> List[Candidate]:
    out = []
    for c in it:
        out.append(c)
        if len(out) == n:
            break
    return out


def run(problem: sp.Problem, evaluator: Evaluator, method: str, trials: int, sampler: str, seed: int,
        workers: int, refine_top: int, quiet: bool = False, limit: Optional[int] = None) -> SearchResult:
    """The recipe (and the recipe scaled to the system), every structure's seeds and a climb from the best of
    each, the sampler (or every point of a small space), then climbs from the best until neither a move nor the
    per-IPU memory proportion improves it. Every outcome is returned."""
    size = sp.size(problem)
    stats = SearchStats(method=method, space_size=size, workers=workers, budget=trials if method == "optuna" else 0)
    outcomes: Dict[Candidate, Outcome] = {}
    t0 = time.perf_counter()
    recipe = evaluator.evaluate(problem.recipe)
    outcomes[problem.recipe] = recipe
    count(stats, recipe)
    scaled = None
    if (c := scaled_recipe(problem)) is not None:
        scaled = outcomes[c] = evaluator.evaluate(c)
        count(stats, scaled)
    pool = Pool(evaluator, workers)
    bar = progress_bar(None, quiet)
    layouts = sp.layouts(problem)
    try:
        starts = seeds(problem)
        stats.seeds = len(starts)
        evaluate_all(pool, stats, outcomes, starts)
        firsts = [problem.recipe] + ([scaled.candidate] if scaled else [])
        for group in _by_structure(starts).values():
            firsts.append(max(group, key=lambda c: score(outcomes.get(c))))
        for c in dict.fromkeys(firsts):
            climb(problem, pool, stats, outcomes, c, layouts)
            _show(bar, stats, outcomes)
        start = stats.candidates
        if method == "exhaustive":
            exhaustive(problem, pool, stats, outcomes, bar, limit=limit)
        else:
            optuna_search(problem, pool, stats, outcomes, trials, sampler, seed, bar)
        stats.sampling = (start, stats.candidates)
        _finish(problem, pool, evaluator, stats, outcomes, layouts, refine_top, bar)
    finally:
        pool.close()
        bar.close()
    stats.seconds = time.perf_counter() - t0
    return SearchResult(outcomes=outcomes, stats=stats, recipe=recipe, scaled=scaled)


def _by_structure(cands: List[Candidate]) -> Dict[Any, List[Candidate]]:
    out: Dict[Any, List[Candidate]] = {}
    for c in cands:
        out.setdefault((c.layout.ipus, c.replicas), []).append(c)
    return out


def _finish(problem: sp.Problem, pool: Pool, evaluator: Evaluator, stats: SearchStats,
            outcomes: Dict[Candidate, Outcome], layouts: List[Any], refine_top: int, bar: Any) -> None:
    """Climb from the best few distinct structures, raise the best's per-IPU proportions, and again from there,
    until the best stays the same."""
    for _ in range(10):
        best = ranked(outcomes)
        if not best:
            return
        before = best[0].candidate
        starts = list(dict.fromkeys(o.candidate for o in _distinct_structures(best, FINISH_STARTS)))
        for c in starts:
            climb(problem, pool, stats, outcomes, c, layouts)
            _show(bar, stats, outcomes)
        if refine_top:
            refine(evaluator, outcomes, stats, refine_top)
        if ranked(outcomes)[0].candidate == before:
            return


def _distinct_structures(best: List[Outcome], n: int) -> List[Outcome]:
    """The fastest outcome of each of the ``n`` fastest structures."""
    seen, out = set(), []
    for o in best:
        key = (o.candidate.layout.ipus, o.candidate.replicas)
        if key not in seen:
            seen.add(key)
            out.append(o)
        if len(out) == n:
            break
    return out


def _show(bar: Any, stats: SearchStats, outcomes: Dict[Candidate, Outcome]) -> None:
    bar.n = stats.candidates
    show_best(bar, outcomes)
    bar.refresh()
