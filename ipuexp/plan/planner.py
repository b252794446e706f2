"""One planning problem end to end: the recipe's config and the plan settings in, ranked outcomes out."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, List, Optional

from ipuexp.config.errors import ConfigError
from ipuexp.config.options import schedules_for
from ipuexp.config.schema import ExperimentConfig
from ipuexp.plan import ranking, search
from ipuexp.plan import space as sp
from ipuexp.plan.candidate import fixed_fields, from_config
from ipuexp.plan.evaluate import Evaluator, Outcome
from ipuexp.plan.pool import workers_for
from ipuexp.plan.settings import PlanConfig


@dataclass
class Plan:
    """A finished search."""

    base: ExperimentConfig
    settings: PlanConfig
    problem: sp.Problem
    result: search.SearchResult
    capture_s: float
    """Seconds spent capturing (or loading from the cache) the graph of each micro-batch size."""
    micro_batches: List[int]

    @property
    def ranked(self) -> List[Outcome]:
        return ranking.ranked(self.result.outcomes)

    @property
    def best(self) -> Optional[Outcome]:
        r = self.ranked
        return r[0] if r else None


def problem_of(base: ExperimentConfig, settings: PlanConfig, layers: int, has_heads: bool,
               has_stem: bool) -> sp.Problem:
    recipe = from_config(base)
    return sp.Problem(layers=layers, has_heads=has_heads, has_stem=has_stem, num_ipus=int(base.system.num_ipus),
                      num_hosts=int(base.system.num_hosts),
                      global_batch=int(settings.global_batch or recipe.global_batch),
                      batch_tolerance=float(settings.batch_tolerance),
                      fixed=fixed_fields(base, settings.fix), recipe=recipe,
                      schedules=schedules_for(base.host.framework))


def prepare(base: ExperimentConfig, settings: PlanConfig) -> tuple:
    """(problem, evaluator, capture seconds, micro-batch sizes): every graph the space needs is captured here."""
    from ipuexp.runner.captures import capture

    cache_dir = base.engine.cache_dir

    def graph_for(m: int) -> Any:
        return capture(base.model, m, cache_dir=cache_dir)

    t0 = time.perf_counter()
    g = graph_for(int(base.data.micro_batch_size))
    layer_idx = [i for i, b in enumerate(g.blocks) if b.is_layer]
    has_heads = bool(layer_idx) and layer_idx[-1] < len(g.blocks) - 1
    has_stem = bool(layer_idx) and layer_idx[0] > 0
    problem = problem_of(base, settings, len(layer_idx), has_heads, has_stem)
    sizes = sorted({m for lay, r in sp.layouts(problem) for m, _ in sp.dimensions(problem, lay, r)["batching"]}
                   | {problem.recipe.micro_batch})
    evaluator = Evaluator(base, graph_for, headroom=settings.headroom, rank=settings.rank)
    for m in sizes:
        evaluator.graph(m)
    return problem, evaluator, time.perf_counter() - t0, sizes


def plan(base: ExperimentConfig, settings: PlanConfig, quiet: bool = False, limit: Optional[int] = None) -> Plan:
    """Search ``base``'s model on ``base``'s system for the fastest configuration that fits."""
    problem, evaluator, capture_s, sizes = prepare(base, settings)
    if not any(sp.dimensions(problem, lay, r)["batching"] for lay, r in sp.layouts(problem)):
        raise ConfigError("plan.global_batch", problem.global_batch,
                          f"allowed: a global batch that micro-batch x replicas x gradient accumulation can make "
                          f"within plan.batch_tolerance={settings.batch_tolerance} on {problem.num_ipus} IPUs")
    size = sp.size(problem)
    method = settings.search
    if method == "auto":
        method = "exhaustive" if size <= settings.exhaustive_limit else "optuna"
    result = search.run(problem, evaluator, method, settings.trials, settings.sampler, settings.seed,
                        workers_for(settings.workers), settings.top_k if settings.refine else 0,
                        quiet=quiet, limit=limit)
    return Plan(base=base, settings=settings, problem=problem, result=result, capture_s=capture_s,
                micro_batches=sizes)
