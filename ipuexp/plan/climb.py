"""Local search: from a candidate, move to the best of its neighbours until none is better.

A neighbour changes one thing: one dimension's value (the micro-batch with the gradient accumulation that keeps
the global batch, as one coupled move), the layout (another split or structure, with the same values where it
offers them and the same micro-batch where it can), or one layer moved to the next stage. A candidate that does
not fit climbs towards the smallest memory shortfall first, so a structure whose seeds are all just over the
limit still reaches its fitting configurations.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Tuple

from ipuexp.plan import space as sp
from ipuexp.plan.candidate import Candidate, Layout
from ipuexp.plan.evaluate import FITS, INVALID, Outcome
from ipuexp.plan.pool import Pool
from ipuexp.plan.stats import SearchStats, count

MAX_STEPS = 40
"""Moves of one climb at most (a climb moves to a strictly better candidate each step, so it ends anyway)."""


def score(o: Optional[Outcome]) -> Tuple[int, float]:
    """Fitting first, then faster; among those that do not fit, a smaller shortfall."""
    if o is None or o.status == INVALID:
        return (-1, 0.0)
    if o.status == FITS:
        return (1, o.score)
    return (0, -float(o.shortfall_bytes))


def values_of(c: Candidate) -> Dict[str, object]:
    return {"schedule": c.schedule, "partials": c.partials, "recompute": c.recompute,
            "device_iterations": c.device_iterations, "instances": c.instances,
            "optimizer_state": c.optimizer_state, "weights_on_chip": c.weights_on_chip, "io_tiles": c.io_tiles,
            "prefetch": c.prefetch, "amp0": c.amp[0], "amp": c.amp[-1] if len(c.amp) > 1 else None,
            "batching": (c.micro_batch, c.grad_accum)}


def _moved(p: sp.Problem, c: Candidate, lay: Layout, replicas: int, dims: Dict[str, tuple]) -> Optional[Candidate]:
    """``c``'s values on another layout: where the layout does not offer a value, its first; the same micro-batch
    (with the gradient accumulation of these replicas) or the nearest one offered."""
    if not dims["batching"]:
        return None
    v = values_of(c)
    out = {k: (v[k] if v[k] in dims[k] else dims[k][0]) for k in dims if k not in ("amp0", "amp", "batching")}
    out["batching"] = min(dims["batching"], key=lambda mg: (abs(mg[0] - c.micro_batch), mg[0]))
    out["amp0"] = c.amp[0]
    out["amp"] = None if dims["amp"] == (None,) else c.amp[-1]
    fixed_amp = p.recipe.amp if "amp" in p.fixed else None
    same = lay.ipus == len(c.amp) and lay.ipus > 1
    return sp.build(lay, replicas, out, fixed_amp if fixed_amp is not None else (c.amp if same else None))


def shifted(lay: Layout) -> List[Layout]:
    """``lay`` with one layer moved to a neighbouring stage (every stage keeps what makes it a stage: a stage
    emptied of layers is allowed only where ``space.layouts`` allows it, which the rule table checks)."""
    s = list(lay.layers_per_ipu)
    out = []
    for i in range(len(s) - 1):
        for a, b in ((i, i + 1), (i + 1, i)):
            if s[a] > 0:
                t = list(s)
                t[a] -= 1
                t[b] += 1
                out.append(Layout(tuple(t), lay.device_mapping))
    return out


def neighbours(p: sp.Problem, c: Candidate, layouts: List[Tuple[Layout, int]]) -> List[Candidate]:
    """Every candidate one move away from ``c``."""
    fixed_amp = p.recipe.amp if "amp" in p.fixed else None
    dims = sp.dimensions(p, c.layout, c.replicas)
    v = values_of(c)
    if dims["amp"] == (None,):
        v["amp"] = None
    out: List[Candidate] = []
    # A move of anything but the proportions keeps the candidate's per-IPU proportions (refined or fixed).
    per_ipu = c.amp if len(set(c.amp)) > 1 or fixed_amp is not None else None
    for name, choices in dims.items():
        for choice in choices:
            if choice != v.get(name):
                out.append(sp.build(c.layout, c.replicas, dict(v, **{name: choice}),
                                    None if name in ("amp0", "amp") else per_ipu))
    others = [(lay, r) for lay, r in layouts if (lay, r) != (c.layout, c.replicas)]
    if "layout" not in p.fixed:
        others += [(lay, c.replicas) for lay in shifted(c.layout)]
    for lay, r in dict.fromkeys(others):
        moved = _moved(p, c, lay, r, sp.dimensions(p, lay, r))
        if moved is not None:
            out.append(moved)
    return list(dict.fromkeys(x for x in out if x != c))


def evaluate_all(pool: Pool, stats: SearchStats, outcomes: Dict[Candidate, Outcome],
                 batch: Iterable[Candidate]) -> None:
    fresh = [c for c in dict.fromkeys(batch) if c not in outcomes]
    if fresh:
        for o in pool.map_async(fresh)():
            outcomes[o.candidate] = o
            count(stats, o)


def climb(p: sp.Problem, pool: Pool, stats: SearchStats, outcomes: Dict[Candidate, Outcome],
          start: Candidate, layouts: List[Tuple[Layout, int]]) -> Candidate:
    """Best-improvement hill climbing from ``start``; the candidate it ends on."""
    current = start
    evaluate_all(pool, stats, outcomes, [start])
    for _ in range(MAX_STEPS):
        near = neighbours(p, current, layouts)
        evaluate_all(pool, stats, outcomes, near)
        best = max(near, key=lambda x: score(outcomes.get(x)), default=current)
        if score(outcomes.get(best)) <= _improved(score(outcomes.get(current))):
            return current
        current = best
    return current


def _improved(s: Tuple[int, float]) -> Tuple[int, float]:
    """The score a move must beat: a hair above the current one (ties and rounding do not move the climb)."""
    return (s[0], s[1] + abs(s[1]) * 1e-9)
