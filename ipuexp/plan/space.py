"""The search space: every way of running one model on one system at one global batch.

The dimensions follow the options Graphcore's published configurations tune (IPU optimisation guide, chapters
4-6): the pipeline split and where the heads go, the schedule, available memory proportion, partials type,
recomputation, micro-batch and gradient accumulation at a fixed global batch, device iterations, instances,
tensor locations and IO tiles. Each point is a :class:`~ipuexp.plan.candidate.Candidate`.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ipuexp.config.options import POPART_SCHEDULES
from ipuexp.plan.candidate import Candidate, Layout

AMP_GRID = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6)
"""Available memory proportions tried (PopLibs' default 0.6 down to 0.05, below which it warns of code size)."""
MICRO_BATCHES = (1, 2, 4, 8, 16, 32, 64)
DEVICE_ITERATIONS = (1, 2, 4, 8, 16)
IO_TILES = (0, 32, 64, 128)
PREFETCH = (1, 2, 3)
RECOMPUTATION = (("none", False), ("pipeline", False), ("pipeline", True), ("all", False), ("all", True))
OPTIMIZER_STATE = ((True, False), (True, True), (False, False), (False, True))
"""(on chip, replicated tensor sharding) of the optimizer state."""


def splits(layers: int, stages: int) -> List[Tuple[int, ...]]:
    """Layer counts for ``stages`` stages: the even split, and the splits with a lighter or heavier first or
    last stage (the embeddings sit with the first layers, the heads with the last or on IPU 0), the rest even."""
    if stages == 1:
        return [(layers,)]

    def even(total: int, parts: int) -> Tuple[int, ...]:
        q, r = divmod(total, parts)
        return tuple(q + (1 if i >= parts - r else 0) for i in range(parts))

    out = {even(layers, stages)}
    for k in range(0, math.ceil(layers / stages) + 3):
        if k <= layers:
            out.add((k,) + even(layers - k, stages - 1))
            out.add(even(layers - k, stages - 1) + (k,))
    return sorted(out)


@dataclass(frozen=True)
class Problem:
    """What is searched: the model's shape, the system, the batch, what is fixed."""

    layers: int
    has_heads: bool
    """The model has blocks after its last layer (heads), which may take a stage of their own on IPU 0."""
    has_stem: bool
    """The model has blocks before its first layer (embeddings), which keep a stage of no layers busy."""
    num_ipus: int
    num_hosts: int
    global_batch: int
    batch_tolerance: float
    fixed: frozenset
    recipe: Candidate
    schedules: Tuple[str, ...] = POPART_SCHEDULES
    """The pipeline schedules the host framework runs (``config.options.schedules_for``)."""


def layouts(p: Problem) -> List[Tuple[Layout, int]]:
    """(layout, replicas) pairs that fill the system: IPUs per replica a power of two, replicas x IPUs = all IPUs
    (or the recipe's replicas when they are fixed)."""
    r = p.recipe
    if "layout" in p.fixed:
        return [(r.layout, r.replicas if "replicas" in p.fixed else max(1, p.num_ipus // r.layout.ipus))]
    out = []
    n = 1
    while n <= min(p.num_ipus, max(p.layers, 1)):
        replicas = r.replicas if "replicas" in p.fixed else p.num_ipus // n
        if replicas * n <= p.num_ipus:
            if n == 1:
                out.append((Layout((), None), replicas))
            else:
                for s in splits(p.layers, n):
                    if _blocks_everywhere(p, s, head_stage=False):
                        out.append((Layout(s, None), replicas))
                    if p.has_heads and _blocks_everywhere(p, s, head_stage=True):
                        out.append((Layout(s, tuple(range(n)) + (0,)), replicas))
        n *= 2
    return out


def _blocks_everywhere(p: Problem, split: Tuple[int, ...], head_stage: bool) -> bool:
    """Every stage gets a block: a stage of no layers is kept only where the embeddings (first stage) or the
    heads (last stage, when they have no stage of their own) fill it."""
    last = len(split) - 1
    return all(n > 0 or (i == 0 and p.has_stem) or (i == last and p.has_heads and not head_stage)
               for i, n in enumerate(split))


def _batching(p: Problem, replicas: int) -> List[Tuple[int, int]]:
    """(micro-batch, gradient accumulation) pairs whose global batch is within the tolerance."""
    r = p.recipe
    mbs = (r.micro_batch,) if "micro_batch" in p.fixed else tuple(sorted(set(MICRO_BATCHES) | {r.micro_batch}))
    out = []
    for m in mbs:
        if "grad_accum" in p.fixed:
            ga = r.grad_accum
        else:
            ga = max(1, round(p.global_batch / (m * replicas)))
        if abs(m * replicas * ga - p.global_batch) <= p.batch_tolerance * p.global_batch:
            out.append((m, ga))
    return out


def _choices(p: Problem, name: str, values: Sequence[Any]) -> Tuple[Any, ...]:
    own = getattr(p.recipe, name)
    return (own,) if name in p.fixed else tuple(dict.fromkeys(list(values) + [own]))


def _instances(p: Problem, replicas: int) -> Tuple[int, ...]:
    if "instances" in p.fixed:
        return (p.recipe.instances,)
    return tuple(sorted({i for i in (1, p.num_hosts, replicas, p.recipe.instances) if replicas % i == 0}))


def dimensions(p: Problem, layout: Layout, replicas: int) -> Dict[str, Tuple[Any, ...]]:
    """The values of every dimension for one layout (those of fixed fields: the recipe's alone)."""
    n, stages = layout.ipus, layout.stages
    pipelined = stages > 1
    schedules = p.schedules if pipelined else ("grouped",)
    recompute = RECOMPUTATION if pipelined else (("none", False), ("all", False), ("all", True))
    dims = {
        "schedule": _choices(p, "schedule", schedules),
        "partials": _choices(p, "partials", ("half", "float")),
        "recompute": _choices(p, "recompute", recompute),
        "batching": tuple(_batching(p, replicas)),
        "device_iterations": _choices(p, "device_iterations", DEVICE_ITERATIONS),
        "instances": _instances(p, replicas),
        "optimizer_state": _choices(p, "optimizer_state", OPTIMIZER_STATE if replicas > 1 else
                                    ((True, False), (False, False))),
        "weights_on_chip": _choices(p, "weights_on_chip", (True, False)),
        "io_tiles": _choices(p, "io_tiles", IO_TILES),
        "prefetch": _choices(p, "prefetch", PREFETCH),
    }
    if "amp" in p.fixed:
        own = p.recipe.amp
        dims["amp0"] = (own[0],)
        dims["amp"] = (own[-1],) if n > 1 else (own[0],)
    else:
        dims["amp0"] = AMP_GRID
        dims["amp"] = AMP_GRID if n > 1 else (None,)
    return dims


def build(layout: Layout, replicas: int, values: Dict[str, Any], fixed_amp: Optional[Tuple[float, ...]] = None
          ) -> Candidate:
    """The candidate of one point of ``dimensions`` (``amp0`` for IPU 0, ``amp`` for the others)."""
    n = layout.ipus
    m, ga = values["batching"]
    if fixed_amp is not None and len(fixed_amp) == n:
        amp = fixed_amp
    else:
        amp = (values["amp0"],) + (values["amp"],) * (n - 1)
    return Candidate(layout=layout, replicas=replicas, schedule=values["schedule"], amp=amp,
                     partials=values["partials"], recompute=values["recompute"], micro_batch=m, grad_accum=ga,
                     device_iterations=values["device_iterations"], instances=values["instances"],
                     optimizer_state=values["optimizer_state"], weights_on_chip=values["weights_on_chip"],
                     io_tiles=values["io_tiles"], prefetch=values["prefetch"])


def size(p: Problem) -> int:
    """Points in the space (before validation)."""
    return sum(math.prod(len(v) for v in dimensions(p, lay, r).values()) for lay, r in layouts(p))


def enumerate_all(p: Problem) -> Iterator[Candidate]:
    """Every point of the space, layout by layout."""
    for lay, r in layouts(p):
        dims = dimensions(p, lay, r)
        names = list(dims)
        fixed_amp = p.recipe.amp if "amp" in p.fixed else None
        for combo in itertools.product(*(dims[k] for k in names)):
            yield build(lay, r, dict(zip(names, combo)), fixed_amp)
