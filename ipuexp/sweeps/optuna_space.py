"""The search space of ipuexp's Optuna sweeper, from Hydra's override grammar as Hydra parses it.

``key=choice(a,b)`` is categorical; ``key=range(start,stop,step)`` an integer (or, with a float bound, a stepped
float) distribution over ``[start, stop)``; ``key=interval(a,b)`` a float between a and b, ``int(interval(a,b))`` an
integer; ``tag(log, interval(...))`` samples in the log domain. A value that is not a sweep is a fixed parameter of
every trial. This follows hydra-optuna-sweeper's mapping, on the distributions of current Optuna
(``FloatDistribution``, ``IntDistribution``, ``CategoricalDistribution``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence

OBJECTIVES = {
    "throughput_samples_per_s": "maximize",
    "step_time_s": "minimize",
    "mfu": "maximize",
    "peak_tile_memory_bytes": "minimize",
    "peak_ipu_memory_bytes": "minimize",
}
"""What a trial can be judged by (a run's MLflow metric of that name) and its natural direction."""


@dataclass
class Space:
    """The trials' parameters: sampled ones by their Optuna distribution, fixed ones by their value."""

    distributions: Dict[str, Any] = field(default_factory=dict)
    fixed: Dict[str, str] = field(default_factory=dict)

    def signature(self) -> Dict[str, str]:
        """What a resumed study must share with the one stored: each parameter's distribution or value."""
        from optuna.distributions import distribution_to_json

        out = {k: distribution_to_json(d) for k, d in self.distributions.items()}
        out.update({k: f"fixed {v}" for k, v in self.fixed.items()})
        return dict(sorted(out.items()))


def _distribution(override: Any) -> Any:
    """The Optuna distribution of a sweep override, or its value as a string when it is not a sweep."""
    from hydra.core.override_parser.types import Transformer
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from ipuexp.config.errors import ConfigError
    from ipuexp.sweeps.optuna_checks import check_interval, check_steps

    if not override.is_sweep_override():
        return override.get_value_element_as_str()
    value = override.value()
    key = override.get_key_element()
    if override.is_choice_sweep() or (override.is_range_sweep() and value.shuffle):
        choices = list(override.sweep_iterator(transformer=Transformer.encode))
        bad = [c for c in choices if not isinstance(c, (str, int, float, bool, type(None)))]
        if bad:
            raise ConfigError(key, bad[0], "allowed: str, int, float, bool or null values in a choice")
        return CategoricalDistribution(choices)
    if override.is_range_sweep():
        shown = override.input_line.split("=", 1)[-1]
        if value.step <= 0:  # Optuna's distributions step upwards
            raise ConfigError(key, shown, "allowed: range(start, stop, step) with step > 0 and stop > start")
        if any(isinstance(v, float) for v in (value.start, value.stop, value.step)):
            # range() excludes its stop: the last value is the one below it
            steps = math.floor((value.stop - value.start) / value.step - 1e-9)
            check_steps(key, shown, steps + 1)
            return FloatDistribution(value.start, round(value.start + steps * value.step, 12), step=value.step)
        last = len(range(int(value.start), int(value.stop), int(value.step))) - 1
        check_steps(key, shown, last + 1)
        return IntDistribution(int(value.start), int(value.start) + last * int(value.step), step=int(value.step))
    if override.is_interval_sweep():
        log = "log" in value.tags
        check_interval(key, value.start, value.end, log)
        if isinstance(value.start, int) and isinstance(value.end, int):
            return IntDistribution(value.start, value.end, log=log)
        return FloatDistribution(float(value.start), float(value.end), log=log)
    raise ConfigError(key, override.get_value_element_as_str(), "allowed: choice, range or interval")


def space(arguments: Sequence[str]) -> Space:
    """The search space of the command line's overrides and ``hydra.sweeper.params`` (given first, so the
    command line wins)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException
    from optuna.distributions import BaseDistribution

    from ipuexp.config.errors import unparsable

    out = Space()
    try:
        parsed = OverridesParser.create().parse_overrides(list(arguments))
    except OverrideParseException as exc:
        raise unparsable(exc.override, exc.message) from None
    for override in parsed:
        key = override.get_key_element()
        value = _distribution(override)
        out.distributions.pop(key, None)
        out.fixed.pop(key, None)
        if isinstance(value, BaseDistribution):
            out.distributions[key] = value
        else:
            out.fixed[key] = value
    return out


def _shown(d: Any) -> str:
    return f"{'tag(log, ' if d.log else ''}interval({d.low}, {d.high}){')' if d.log else ''}"


def grid(distributions: Dict[str, Any]) -> Dict[str, List[Any]]:
    """Each parameter's values for Optuna's grid sampler (discrete distributions only)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from ipuexp.config.errors import ConfigError

    out: Dict[str, List[Any]] = {}
    for key, d in distributions.items():
        if isinstance(d, CategoricalDistribution):
            out[key] = list(d.choices)
        elif isinstance(d, (IntDistribution, FloatDistribution)) and d.step is not None and not d.log:
            n = int(round((d.high - d.low) / d.step)) + 1
            out[key] = [d.low + i * d.step for i in range(n)]
        else:
            raise ConfigError(key, _shown(d), "allowed: choice(...) or range(...) under the grid sampler, whose "
                              "values are listed; an interval is for the other samplers")
    return out


def directions(objectives: Sequence[str], direction: Any) -> List[str]:
    """Each objective's direction: ``direction`` (one for all, or one each), else the objective's own."""
    from collections.abc import Sequence as Seq

    from ipuexp.config.errors import ConfigError

    names = list(objectives)
    for name in names or [""]:
        if name not in OBJECTIVES:
            raise ConfigError("hydra.sweeper.objectives", names, f"allowed: one or more of {', '.join(OBJECTIVES)}")
    if direction is None:
        return [OBJECTIVES[n] for n in names]
    listed = isinstance(direction, Seq) and not isinstance(direction, str)
    given = [str(getattr(d, "name", d)) for d in (direction if listed else [direction] * len(names))]
    if len(given) != len(names) or any(d not in ("maximize", "minimize") for d in given):
        raise ConfigError("hydra.sweeper.direction", given, f"allowed: maximize or minimize, one for all or one per "
                          f"objective ({', '.join(names)})")
    return given
