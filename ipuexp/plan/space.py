"""The search space: every way of running one model on one system at one global batch.

A :class:`Candidate` holds the values the planner chooses; ``apply`` writes them into a copy of the recipe's
``ExperimentConfig``, which the one rule table (``config.validate``) then accepts or rejects. The dimensions follow
the options Graphcore's published configurations tune (IPU optimisation guide, chapters 4-6): the pipeline split
and where the heads go, the schedule, available memory proportion, partials type, recomputation, micro-batch and
gradient accumulation at a fixed global batch, device iterations, instances, tensor locations and IO tiles.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ipuexp.config.errors import ConfigError
from ipuexp.config.pipeline import stage_mapping
from ipuexp.config.schema import ExperimentConfig, PartialsType, RecomputationMode, Schedule, option_value

AMP_GRID = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6)
"""Available memory proportions tried (PopLibs' default 0.6 down to 0.05, below which it warns of code size)."""
MICRO_BATCHES = (1, 2, 4, 8, 16, 32, 64)
DEVICE_ITERATIONS = (1, 2, 4, 8, 16)
IO_TILES = (0, 32, 64, 128)
PREFETCH = (1, 2, 3)
RECOMPUTATION = (("none", False), ("pipeline", False), ("pipeline", True), ("all", False), ("all", True))
OPTIMIZER_STATE = ((True, False), (True, True), (False, False), (False, True))
"""(on chip, replicated tensor sharding) of the optimizer state."""


@dataclass(frozen=True)
class Layout:
    """How one replica is laid out: layer counts per stage and the IPU of each stage (None: stage i on IPU i)."""

    layers_per_ipu: Tuple[int, ...]
    device_mapping: Optional[Tuple[int, ...]]

    @property
    def ipus(self) -> int:
        return len(set(stage_mapping(self.layers_per_ipu, self.device_mapping)))

    @property
    def stages(self) -> int:
        return max(len(self.device_mapping or ()), len(self.layers_per_ipu), 1)


@dataclass(frozen=True)
class Candidate:
    """One configuration the planner may choose (hashable: results are cached on it)."""

    layout: Layout
    replicas: int
    schedule: str
    amp: Tuple[float, ...]
    """Available memory proportion of each IPU of a replica."""
    partials: str
    recompute: Tuple[str, bool]
    """(options.recomputation.mode, options.recomputation.checkpoint_every_layer)."""
    micro_batch: int
    grad_accum: int
    device_iterations: int
    instances: int
    optimizer_state: Tuple[bool, bool]
    weights_on_chip: bool
    io_tiles: int
    prefetch: int

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.replicas * self.grad_accum


def from_config(exp: ExperimentConfig) -> Candidate:
    """The candidate an experiment config already is (the recipe's own configuration)."""
    o = exp.options
    p = o.pipeline
    dm = tuple(p.device_mapping) if p.device_mapping else None
    layout = Layout(tuple(p.layers_per_ipu or ()), dm)
    n = layout.ipus
    amp = o.available_memory_proportion
    amps = tuple(float(a) for a in amp) if isinstance(amp, (list, tuple)) else (float(amp),)
    if len(amps) == 1:
        amps = amps * n
    loc = o.tensor_locations
    return Candidate(layout=layout, replicas=int(o.replication_factor), schedule=option_value(p.schedule),
                     amp=amps, partials=option_value(o.partials_type),
                     recompute=(option_value(o.recomputation.mode), bool(o.recomputation.checkpoint_every_layer)),
                     micro_batch=int(exp.data.micro_batch_size), grad_accum=int(o.gradient_accumulation),
                     device_iterations=int(o.device_iterations), instances=int(o.num_instances),
                     optimizer_state=(bool(loc.optimizer_state.on_chip),
                                      bool(loc.optimizer_state.replicated_tensor_sharding)),
                     weights_on_chip=bool(loc.weights.on_chip), io_tiles=int(o.io.num_io_tiles),
                     prefetch=int(o.io.prefetch_depth))


def apply(base: ExperimentConfig, c: Candidate) -> ExperimentConfig:
    """A copy of ``base`` running as ``c`` (``base`` is not changed; unchanged parts are shared)."""
    o = base.options
    loc = o.tensor_locations
    amp: Any = list(c.amp) if len(set(c.amp)) > 1 else c.amp[0]
    options = replace(
        o, replication_factor=c.replicas, gradient_accumulation=c.grad_accum, device_iterations=c.device_iterations,
        available_memory_proportion=amp, partials_type=PartialsType(c.partials), num_instances=c.instances,
        recomputation=replace(o.recomputation, mode=RecomputationMode(c.recompute[0]),
                              checkpoint_every_layer=c.recompute[1]),
        tensor_locations=replace(loc, optimizer_state=replace(loc.optimizer_state, on_chip=c.optimizer_state[0],
                                                              replicated_tensor_sharding=c.optimizer_state[1]),
                                 weights=replace(loc.weights, on_chip=c.weights_on_chip)),
        io=replace(o.io, num_io_tiles=c.io_tiles, prefetch_depth=c.prefetch),
        pipeline=replace(o.pipeline, schedule=Schedule(c.schedule), layers_per_ipu=list(c.layout.layers_per_ipu),
                         device_mapping=list(c.layout.device_mapping) if c.layout.device_mapping else None))
    return replace(base, options=options, data=replace(base.data, micro_batch_size=c.micro_batch))


# Config keys a user may hold at the recipe's value (plan.fix), and the candidate fields each one pins.
SEARCHED_KEYS: Dict[str, Tuple[str, ...]] = {
    "options.replication_factor": ("replicas",),
    "options.pipeline.layers_per_ipu": ("layout",),
    "options.pipeline.device_mapping": ("layout",),
    "options.pipeline.schedule": ("schedule",),
    "options.available_memory_proportion": ("amp",),
    "options.partials_type": ("partials",),
    "options.recomputation.mode": ("recompute",),
    "options.recomputation.checkpoint_every_layer": ("recompute",),
    "data.micro_batch_size": ("micro_batch",),
    "options.gradient_accumulation": ("grad_accum",),
    "options.device_iterations": ("device_iterations",),
    "options.num_instances": ("instances",),
    "options.tensor_locations.optimizer_state.on_chip": ("optimizer_state",),
    "options.tensor_locations.optimizer_state.replicated_tensor_sharding": ("optimizer_state",),
    "options.tensor_locations.weights.on_chip": ("weights_on_chip",),
    "options.io.num_io_tiles": ("io_tiles",),
    "options.io.prefetch_depth": ("prefetch",),
}


def fixed_fields(base: ExperimentConfig, keys: Sequence[str]) -> frozenset:
    """Candidate fields pinned by ``plan.fix``; a key that names no config value is a ConfigError. Keys the
    planner never changes (precision, optimizer, model, ...) are accepted: they are fixed already."""
    from ipuexp.config.checks import value_at

    pinned = set()
    for key in keys:
        try:
            value_at(base, key)
        except AttributeError:
            raise ConfigError("plan.fix", key, "allowed: config keys such as "
                              + ", ".join(sorted(SEARCHED_KEYS))) from None
        pinned.update(SEARCHED_KEYS.get(key, ()))
    return frozenset(pinned)


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
    schedules = ("grouped", "interleaved", "sequential") if pipelined else ("grouped",)
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


def config_values(c: Candidate) -> Dict[str, Any]:
    """The config values of ``c``, by config key (in the order of ``SEARCHED_KEYS``)."""
    return {
        "options.replication_factor": c.replicas,
        "options.pipeline.layers_per_ipu": list(c.layout.layers_per_ipu),
        "options.pipeline.device_mapping": list(c.layout.device_mapping) if c.layout.device_mapping else None,
        "options.pipeline.schedule": c.schedule,
        "options.available_memory_proportion": list(c.amp),
        "options.partials_type": c.partials,
        "options.recomputation.mode": c.recompute[0],
        "options.recomputation.checkpoint_every_layer": c.recompute[1],
        "data.micro_batch_size": c.micro_batch,
        "options.gradient_accumulation": c.grad_accum,
        "options.device_iterations": c.device_iterations,
        "options.num_instances": c.instances,
        "options.tensor_locations.optimizer_state.on_chip": c.optimizer_state[0],
        "options.tensor_locations.optimizer_state.replicated_tensor_sharding": c.optimizer_state[1],
        "options.tensor_locations.weights.on_chip": c.weights_on_chip,
        "options.io.num_io_tiles": c.io_tiles,
        "options.io.prefetch_depth": c.prefetch,
    }


def param_values(c: Candidate) -> Dict[str, str]:
    """``config_values`` as text (MLflow parameters)."""
    return {k: value_text(v) for k, v in config_values(c).items()}


def differences(c: Candidate, recipe: Candidate) -> List[str]:
    """What ``c`` changes from the recipe, as ``key=value`` strings (config vocabulary)."""
    theirs = config_values(recipe)
    return [f"{k}={value_text(v)}" for k, v in config_values(c).items() if v != theirs[k]]


def value_text(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list):
        return "[" + ",".join(value_text(x) for x in v) + "]"
    if v is None:
        return "null"
    return f"{v:g}" if isinstance(v, float) else str(v)
