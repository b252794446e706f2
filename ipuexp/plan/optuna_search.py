"""The search of a large space: Optuna proposes structures, each evaluated with every value of the inner
dimensions."""
from __future__ import annotations

from typing import Any, Dict, List

from ipuexp.plan import space as sp
from ipuexp.plan.candidate import Candidate
from ipuexp.plan.evaluate import INVALID, Outcome
from ipuexp.plan.pool import Pool
from ipuexp.plan.stats import SearchStats, count, show_best

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
    # The memory shortfall is each trial's constraint (``Trial.set_constraint``): NSGA-II ranks a trial that fits
    # above one that does not, and two that do not by their shortfall.
    return optuna.samplers.NSGAIISampler(seed=seed, population_size=OPTUNA_BATCH)


def _suggest(trial: Any, problem: sp.Problem, layouts: List[Any], union: Dict[str, tuple],
             dims_of: Dict[int, Dict[str, tuple]]) -> List[Candidate]:
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


def optuna_search(problem: sp.Problem, pool: Pool, stats: SearchStats, outcomes: Dict[Candidate, Outcome],
                  trials: int, sampler: str, seed: int, bar: Any) -> None:
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
            count(stats, o)
            new += o.status != INVALID
        counted += new
        bar.n = stats.candidates
        stats.repeats += len(flat) - len(fresh)
        for t, group in zip(batch, proposals):
            seen = [outcomes[c] for c in group if c in outcomes and outcomes[c].status != INVALID]
            if not seen:
                study.tell(t, state=TrialState.FAIL)
                continue
            fits = [o for o in seen if o.fits]
            best = max(o.score for o in fits) if fits else 0.0
            t.set_constraint("shortfall", float(min(o.shortfall_bytes for o in seen)))
            if multi:
                study.tell(t, [best, float(min(o.peak_tile_bytes for o in seen))])
            else:
                study.tell(t, best)
        show_best(bar, outcomes)
