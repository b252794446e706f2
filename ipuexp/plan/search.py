"""Search the space: exhaustive when it is small, Optuna when it is large, then refine the best.

Candidates are evaluated in batches by a pool of forked processes that share the captured graphs (the parent
captures every micro-batch size before it forks); each process keeps its own engine caches. A candidate the
memory lower bound rejects is counted as pruned, one the rule table rejects is not counted at all.
"""
from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from ipuexp.plan import space as sp
from ipuexp.plan.evaluate import FITS, INVALID, OOM, PRUNED, Evaluator, Outcome

BATCH = 128
"""Candidates handed to the pool at a time (and asked of Optuna at a time)."""
REFINE_STEP = 0.01
"""Resolution of the per-IPU available memory proportion after the search (Graphcore's published values, such
as [0.14, 0.19, 0.19, 0.19], have two decimals)."""

_EVALUATOR: Optional[Evaluator] = None  # the forked workers' evaluator (inherited from the parent)


def _evaluate_batch(batch: Sequence[sp.Candidate]) -> List[Outcome]:
    assert _EVALUATOR is not None
    return [_EVALUATOR.evaluate(c) for c in batch]


@dataclass
class SearchStats:
    """What the search did."""

    method: str
    space_size: int
    evaluated: int = 0
    """Candidates fully evaluated (memory model, and timing)."""
    pruned: int = 0
    """Candidates rejected by the memory lower bound without the full model."""
    invalid: int = 0
    """Points the config rule table rejects (not candidates)."""
    repeats: int = 0
    """Points Optuna proposed again (answered from the cache)."""
    refined: int = 0
    """Evaluations spent raising the best candidates' per-IPU available memory proportion."""
    seconds: float = 0.0
    workers: int = 1

    @property
    def candidates(self) -> int:
        return self.evaluated + self.pruned


@dataclass
class SearchResult:
    outcomes: Dict[sp.Candidate, Outcome]
    stats: SearchStats
    recipe: Outcome
    trials: List[Any] = field(default_factory=list)


class _Pool:
    """Evaluates batches in forked worker processes, or in this process with one worker."""

    def __init__(self, evaluator: Evaluator, workers: int):
        self.evaluator = evaluator
        self.workers = workers
        self._pool = None
        if workers > 1:
            import multiprocessing

            global _EVALUATOR
            _EVALUATOR = evaluator
            self._pool = multiprocessing.get_context("fork").Pool(workers)

    def map_async(self, batch: List[sp.Candidate]) -> Callable[[], List[Outcome]]:
        """Start evaluating ``batch``; the returned function waits for the outcomes."""
        if self._pool is None:
            return lambda: [self.evaluator.evaluate(c) for c in batch]
        chunk = max(1, math.ceil(len(batch) / (self.workers * 2)))
        parts = [batch[i:i + chunk] for i in range(0, len(batch), chunk)]
        pending = self._pool.map_async(_evaluate_batch, parts)
        return lambda: [o for part in pending.get() for o in part]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()


def _count(stats: SearchStats, o: Outcome) -> None:
    if o.status == INVALID:
        stats.invalid += 1
    elif o.status == PRUNED:
        stats.pruned += 1
    else:
        stats.evaluated += 1


def _progress(total: Optional[int], quiet: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, unit="cand", desc="planning", disable=quiet, dynamic_ncols=True, leave=False)


def _show(bar: Any, outcomes: Dict[sp.Candidate, Outcome]) -> None:
    best = max((o.samples_per_s for o in outcomes.values() if o.fits), default=0.0)
    bar.set_postfix_str(f"best {best:,.0f} samples/s", refresh=False)


def exhaustive(problem: sp.Problem, pool: _Pool, stats: SearchStats, outcomes: Dict[sp.Candidate, Outcome],
               quiet: bool = False, limit: Optional[int] = None) -> None:
    """Every point of the space (the first ``limit`` ones with a limit)."""
    bar = _progress(min(stats.space_size, limit or stats.space_size), quiet)
    it = iter(sp.enumerate_all(problem))
    done = 0
    pending = None
    while True:
        batch = [c for c in _take(it, BATCH) if c not in outcomes]
        if pending is not None:
            for o in pending():
                outcomes[o.candidate] = o
                _count(stats, o)
                bar.update(1)
            _show(bar, outcomes)
        if not batch or (limit is not None and done >= limit):
            break
        done += len(batch)
        pending = pool.map_async(batch)
    bar.close()


def _take(it: Iterable[sp.Candidate], n: int) -> List[sp.Candidate]:
    out = []
    for c in it:
        out.append(c)
        if len(out) == n:
            break
    return out


INNER = ("device_iterations", "instances", "prefetch", "optimizer_state")
"""Dimensions every Optuna trial enumerates in full: they leave the tiles' planning context alone, so their
candidates share the engine's caches, and Optuna's own cost is paid once per structure instead of per candidate."""
OPTUNA_BATCH = 16
"""Trials asked of Optuna at a time (NSGA-II's population)."""


def _sampler(name: str, seed: int) -> Any:
    import optuna

    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=OPTUNA_BATCH)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    # Optuna 2.x flags constraints_func as experimental on every construction; the planner pins the version.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=OPTUNA_BATCH,
                                             constraints_func=lambda t: [float(t.user_attrs.get("shortfall", 0.0))])


def _suggest(trial: Any, problem: sp.Problem, layouts: List[Any], union: Dict[str, tuple],
             dims_of: Dict[int, Dict[str, tuple]]) -> List[sp.Candidate]:
    """The candidates of a trial: the structure it suggests, with every value of the ``INNER`` dimensions; none
    when its micro-batch gives no global batch within tolerance."""
    import itertools

    li = trial.suggest_categorical("layout", list(range(len(layouts)))) if len(layouts) > 1 else 0
    lay, replicas = layouts[li]
    dims = dims_of.get(li) or dims_of.setdefault(li, sp.dimensions(problem, lay, replicas))
    values: Dict[str, Any] = {}
    for name, choices in union.items():
        if name in INNER:
            continue
        values[name] = choices[trial.suggest_categorical(name, list(range(len(choices))))] if len(choices) > 1 \
            else choices[0]
    batching = {m: ga for m, ga in dims["batching"]}
    if values["micro_batch"] not in batching:
        return []
    values["batching"] = (values["micro_batch"], batching[values["micro_batch"]])
    for name, choices in dims.items():  # a value this layout does not offer: the layout's first
        if name not in INNER and name not in ("batching", "amp0", "amp") and values[name] not in choices:
            values[name] = choices[0]
    if dims["amp"] == (None,):
        values["amp"] = None
    fixed_amp = problem.recipe.amp if "amp" in problem.fixed else None
    out = []
    for combo in itertools.product(*(dims[k] for k in INNER)):
        values.update(zip(INNER, combo))
        out.append(sp.build(lay, replicas, values, fixed_amp))
    return out


def _union_dims(problem: sp.Problem) -> Dict[str, tuple]:
    """Every dimension's values over all layouts (Optuna's categorical choices must not depend on the layout)."""
    union: Dict[str, list] = {}
    for lay, r in sp.layouts(problem):
        for name, values in sp.dimensions(problem, lay, r).items():
            if name == "batching":
                name, values = "micro_batch", tuple(m for m, _ in values)
            for v in values:
                if v is not None and v not in union.setdefault(name, []):
                    union[name].append(v)
    union.setdefault("amp", [None])
    return {k: tuple(v) for k, v in union.items()}


def optuna_search(problem: sp.Problem, pool: _Pool, stats: SearchStats, outcomes: Dict[sp.Candidate, Outcome],
                  trials: int, sampler: str, seed: int, quiet: bool = False) -> None:
    """Ask Optuna for structures, evaluate each with every value of the ``INNER`` dimensions, and tell it the
    best: throughput of the fastest fitting candidate (and, for NSGA-II, the smallest fullest tile, minimised),
    with the smallest memory shortfall as the constraint. Stops after ``trials`` distinct candidates."""
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    multi = sampler == "nsga2"
    study = optuna.create_study(sampler=_sampler(sampler, seed),
                                directions=["maximize", "minimize"] if multi else ["maximize"])
    layouts = sp.layouts(problem)
    union = _union_dims(problem)
    dims_of: Dict[int, Dict[str, tuple]] = {}
    bar = _progress(trials, quiet)
    asked, counted = 0, 0
    while counted < trials and asked < 50 * trials:
        batch = [study.ask() for _ in range(OPTUNA_BATCH)]
        asked += len(batch) * len(INNER)
        proposals = [_suggest(t, problem, layouts, union, dims_of) for t in batch]
        flat = [c for group in proposals for c in group]
        fresh = list(dict.fromkeys(c for c in flat if c not in outcomes))[:max(trials - counted, 0)]
        new = 0
        for o in pool.map_async(fresh)():
            outcomes[o.candidate] = o
            _count(stats, o)
            new += o.status != INVALID
        counted += new
        bar.update(new)
        stats.repeats += len(flat) - len(fresh)
        for t, group in zip(batch, proposals):
            seen = [outcomes[c] for c in group if c in outcomes and outcomes[c].status != INVALID]
            if not seen:
                study.tell(t, state=TrialState.FAIL)
                continue
            fits = [o for o in seen if o.fits]
            best = max(o.samples_per_s for o in fits) if fits else 0.0
            t.set_user_attr("shortfall", float(min(o.shortfall_bytes for o in seen)))
            if multi:
                study.tell(t, [best, float(min(o.peak_tile_bytes for o in seen))])
            else:
                study.tell(t, best)
        _show(bar, outcomes)
    bar.close()


def refine(evaluator: Evaluator, outcomes: Dict[sp.Candidate, Outcome], stats: SearchStats, top: int) -> None:
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
                    _count(stats, res)
                    stats.refined += 1
                if res.fits:
                    fit, left = res, mid + 1
                else:
                    right = mid - 1
            if fit is not None and fit.samples_per_s > current.samples_per_s * (1 + 1e-9):
                current = fit
        seen.add(current.candidate)


def local_search(problem: sp.Problem, pool: _Pool, stats: SearchStats, outcomes: Dict[sp.Candidate, Outcome],
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
        batch: List[sp.Candidate] = []
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
            _count(stats, o)
        if ranked(outcomes)[0].candidate == b:
            return


def workers_for(requested: int) -> int:
    return requested if requested > 0 else max(1, os.cpu_count() or 1)


def run(problem: sp.Problem, evaluator: Evaluator, method: str, trials: int, sampler: str, seed: int,
        workers: int, refine_top: int, quiet: bool = False, limit: Optional[int] = None) -> SearchResult:
    """Evaluate the recipe's own configuration, search, refine; every outcome is returned."""
    size = sp.size(problem)
    stats = SearchStats(method=method, space_size=size, workers=workers)
    outcomes: Dict[sp.Candidate, Outcome] = {}
    t0 = time.perf_counter()
    recipe = evaluator.evaluate(problem.recipe)
    outcomes[problem.recipe] = recipe
    _count(stats, recipe)
    pool = _Pool(evaluator, workers)
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


def ranked(outcomes: Dict[sp.Candidate, Outcome]) -> List[Outcome]:
    """Fitting candidates, fastest first (ties: more tile headroom first)."""
    return sorted((o for o in outcomes.values() if o.fits), key=lambda o: (-round(o.samples_per_s, 1),
                                                                         o.peak_tile_bytes))


def rejected(outcomes: Dict[sp.Candidate, Outcome], best: Optional[Outcome], n: int) -> List[Outcome]:
    """The most tempting rejected candidates: those out of memory that would have been faster than ``best``
    (fastest first), then the ones closest to fitting."""
    floor = best.samples_per_s if best is not None else 0.0
    oom = sorted((o for o in outcomes.values() if o.status == OOM and o.samples_per_s > floor),
                 key=lambda o: -o.samples_per_s)
    if len(oom) >= n:
        return oom[:n]
    close = sorted((o for o in outcomes.values() if o.status in (OOM, PRUNED) and o not in oom),
                   key=lambda o: o.shortfall_bytes)
    return oom + close[:n - len(oom)]


def closest(outcomes: Dict[sp.Candidate, Outcome]) -> Optional[Outcome]:
    """The rejected candidate with the smallest memory shortfall."""
    return min((o for o in outcomes.values() if o.status in (OOM, PRUNED)), key=lambda o: o.shortfall_bytes,
               default=None)


__all__ = ["FITS", "SearchResult", "SearchStats", "closest", "ranked", "rejected", "run", "workers_for"]
