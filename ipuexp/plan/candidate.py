"""A candidate: one configuration the planner may choose, and its values in the config's own vocabulary.

A :class:`Candidate` holds the values the planner chooses; ``apply`` writes them into a copy of the recipe's
``ExperimentConfig``, which the one rule table (``config.validate``) then accepts or rejects; ``config_values``
names them by config key.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ipuexp.config.errors import ConfigError
from ipuexp.config.pipeline import stage_mapping
from ipuexp.config.schema import ExperimentConfig, PartialsType, RecomputationMode, Schedule, option_value


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
