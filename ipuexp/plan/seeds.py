"""Where the search starts: every structure of the system, each seeded with configurations known to be sensible.

A structure is how the system's IPUs are used: IPUs per replica x replicas (x PopRun instances). There are only a
handful, so every one is tried before any sampling, each with the recipe's own values on the layouts a user would
write first: the recipe's split where it has that many IPUs, the splits Graphcore published for a model of that
depth (the shipped recipes), and the even splits of ``space.splits``. The recipe scaled to the system by data
parallelism (more replicas, the gradient accumulation divided by the same factor, the global batch kept) is the
fair baseline of a plan on a larger system than the recipe's.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Dict, List, Optional, Tuple

from ipuexp.plan import space as sp
from ipuexp.plan.candidate import Candidate, Layout


def scaled_recipe(p: sp.Problem) -> Optional[Candidate]:
    """The recipe on the whole system by data parallelism at the problem's global batch: replicas times the factor
    that fills the system (unless replicas are fixed), and the gradient accumulation that keeps the global batch
    (``plan.global_batch``, else the recipe's). None when that is the recipe itself, or when no whole gradient
    accumulation gives the global batch."""
    r = p.recipe
    used = r.layout.ipus * r.replicas
    k = p.num_ipus // used if "replicas" not in p.fixed and used < p.num_ipus and p.num_ipus % used == 0 else 1
    per_pass = r.micro_batch * r.replicas * k
    if p.global_batch % per_pass:
        return None
    ga = p.global_batch // per_pass
    if k == 1 and ga == r.grad_accum:
        return None
    instances = r.instances if (r.replicas * k) % r.instances == 0 else 1
    return replace(r, replicas=r.replicas * k, grad_accum=ga, instances=instances)


@lru_cache(maxsize=None)
def published_layouts() -> Tuple[Layout, ...]:
    """The pipeline layouts of the shipped recipes (Graphcore's published splits)."""
    from omegaconf import OmegaConf

    from ipuexp.config.store import RECIPES_DIR

    out = []
    for path in sorted(RECIPES_DIR.glob("*.yaml")):
        pipe = OmegaConf.select(OmegaConf.load(path), "options.pipeline") or {}
        layers = pipe.get("layers_per_ipu")
        if layers:
            dm = pipe.get("device_mapping")
            out.append(Layout(tuple(int(x) for x in layers), tuple(int(x) for x in dm) if dm else None))
    return tuple(dict.fromkeys(out))


def structures(p: sp.Problem) -> Dict[Tuple[int, int], List[Layout]]:
    """(IPUs per replica, replicas) -> the layouts of that structure the space offers."""
    out: Dict[Tuple[int, int], List[Layout]] = {}
    for lay, r in sp.layouts(p):
        out.setdefault((lay.ipus, r), []).append(lay)
    return out


def _seed_layouts(p: sp.Problem, n: int, offered: List[Layout]) -> List[Layout]:
    """The layouts a structure of ``n`` IPUs per replica is seeded with: the recipe's, the published ones of this
    depth, and the space's splits with at most one layer between the fullest and the lightest stage."""
    known = [lay for lay in (p.recipe.layout,) + published_layouts()
             if lay.ipus == n and sum(lay.layers_per_ipu) == p.layers]
    if "layout" in p.fixed:
        return known[:1]
    even = [lay for lay in offered if max(lay.layers_per_ipu, default=0) - min(lay.layers_per_ipu, default=0) <= 1]
    return list(dict.fromkeys(known + even))


def seeds(p: sp.Problem) -> List[Candidate]:
    """Every structure's seeds: each seed layout with the recipe's values, at the recipe's micro-batch (the
    gradient accumulation that keeps the global batch) and at every other micro-batch the structure offers."""
    r = p.recipe
    out: List[Candidate] = []
    base = scaled_recipe(p)
    if base is not None:
        out.append(base)
    for (n, replicas), offered in sorted(structures(p).items()):
        for lay in _seed_layouts(p, n, offered):
            dims = sp.dimensions(p, lay, replicas)
            batching = list(dims["batching"])
            if not batching:
                continue
            batching.sort(key=lambda mg: (mg[0] != r.micro_batch, abs(mg[0] - r.micro_batch)))
            for m, ga in batching:
                values = seed_values(r, dims)
                values["batching"] = (m, ga)
                out.append(sp.build(lay, replicas, values, _amp_for(r, lay)))
    return list(dict.fromkeys(out))


def seed_values(r: Candidate, dims: Dict[str, tuple]) -> Dict[str, object]:
    """The recipe's value of every dimension, or the dimension's first value where the structure does not offer
    the recipe's (the recipe's instances on fewer replicas, say)."""
    own = {"schedule": r.schedule, "partials": r.partials, "recompute": r.recompute,
           "device_iterations": r.device_iterations, "instances": r.instances, "optimizer_state": r.optimizer_state,
           "weights_on_chip": r.weights_on_chip, "io_tiles": r.io_tiles, "prefetch": r.prefetch,
           "amp0": r.amp[0], "amp": r.amp[-1] if len(r.amp) > 1 else r.amp[0]}
    values = {k: (v if v in dims[k] else dims[k][0]) for k, v in own.items() if k in dims}
    values["amp0"], values["amp"] = own["amp0"], own["amp"] if dims["amp"] != (None,) else None
    return values


def _amp_for(r: Candidate, lay: Layout) -> Optional[Tuple[float, ...]]:
    """The recipe's per-IPU proportions on a layout of as many IPUs (its own split or a published one)."""
    return r.amp if lay.ipus == len(r.amp) and len(set(r.amp)) > 1 else None
