"""The search space of ipuexp's Optuna sweeper, from Hydra's override grammar as Hydra parses it.

``key=choice(a,b)`` is categorical; ``key=range(start,stop,step)`` an integer (or, with a float bound, a stepped
float) distribution from start to stop, both included, as hydra-optuna-sweeper reads it (the grid sampler lists its
values without the stop, as that plugin does); ``key=interval(a,b)`` a float between a and b, ``int(interval(a,b))``
an integer; ``tag(log, interval(...))`` samples in the log domain. A value that is not a sweep is a fixed parameter
of every trial. This follows hydra-optuna-sweeper 1.2's mapping, on the distributions of current Optuna
(``FloatDistribution``, ``IntDistribution``, ``CategoricalDistribution``); its deprecated ``search_space`` setting is
read by ``from_search_space``.
"""
from __future__ import annotations

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
    from ipuexp.sweeps.optuna_checks import check_interval

    if not override.is_sweep_override():
        # As the user wrote it (tracking.enabled=false, not Hydra's str() of the parsed bool, False): the job
        # parses it again, and the summary echoes it.
        line = override.input_line
        return line.split("=", 1)[1] if line and "=" in line else override.get_value_element_as_str()
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
        if value.step <= 0 or value.stop < value.start:  # Optuna's distributions step upwards
            raise ConfigError(key, shown, "allowed: range(start, stop, step) with step > 0 and stop >= start")
        if any(isinstance(v, float) for v in (value.start, value.stop, value.step)):
            return FloatDistribution(value.start, value.stop, step=value.step)
        return IntDistribution(int(value.start), int(value.stop), step=int(value.step))
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
        if isinstance(value, BaseDistribution):
            out.fixed.pop(key, None)
            out.distributions[key] = value  # a key given twice keeps its place: the trials' draws keep their order
        else:
            out.distributions.pop(key, None)
            out.fixed[key] = value
    return out


def _shown(d: Any) -> str:
    return f"{'tag(log, ' if d.log else ''}interval({d.low}, {d.high}){')' if d.log else ''}"


def grid(distributions: Dict[str, Any]) -> Dict[str, List[Any]]:
    """Each parameter's values for Optuna's grid sampler (discrete distributions only), as hydra-optuna-sweeper
    lists them: a stepped distribution's from its low end, without its high end (``range(1,4)``: 1, 2, 3)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from ipuexp.config.errors import ConfigError

    out: Dict[str, List[Any]] = {}
    for key, d in distributions.items():
        if isinstance(d, CategoricalDistribution):
            out[key] = list(d.choices)
        elif isinstance(d, (IntDistribution, FloatDistribution)) and d.step is not None and not d.log:
            out[key] = [d.low + i * d.step for i in range(int((d.high - d.low) // d.step))]
        else:
            raise ConfigError(key, _shown(d), "allowed: choice(...) or range(...) under the grid sampler, whose "
                              "values are listed; an interval is for the other samplers")
    return out


def objectives_of(objectives: Any, own: bool) -> List[str]:
    """The run metrics a trial is judged by: ``hydra.sweeper.objectives`` (None: the throughput) for ipuexp's own
    jobs; none for another Hydra app, whose trials are judged by the values its task function returns."""
    from ipuexp.config.errors import ConfigError

    names = [str(n) for n in objectives] if objectives is not None else []
    if not own:
        if names:
            raise ConfigError("hydra.sweeper.objectives", names, "allowed: null in a Hydra app other than python -m "
                              "ipuexp (its trials are judged by the value or tuple its task function returns; "
                              "objectives are ipuexp's run metrics)")
        return []
    names = names or ["throughput_samples_per_s"]
    for name in names:
        if name not in OBJECTIVES:
            raise ConfigError("hydra.sweeper.objectives", names, f"allowed: one or more of {', '.join(OBJECTIVES)}")
    return names


def directions(objectives: Sequence[str], direction: Any) -> List[str]:
    """Each objective's direction: ``direction`` (one for all, or one each), else the objective's own. Without
    objectives (another Hydra app) ``direction`` says how many values a trial returns: one (None: minimize, as
    hydra-optuna-sweeper) or one direction per value of the returned tuple."""
    from collections.abc import Sequence as Seq

    from ipuexp.config.errors import ConfigError

    names = list(objectives)
    if direction is None:
        return [OBJECTIVES[n] for n in names] if names else ["minimize"]
    listed = isinstance(direction, Seq) and not isinstance(direction, str)
    given = [str(getattr(d, "name", d)) for d in (direction if listed else [direction] * max(1, len(names)))]
    if (names and len(given) != len(names)) or not given or any(d not in ("maximize", "minimize") for d in given):
        each = f"one for all or one per objective ({', '.join(names)})" if names else \
            "one, or a list of one per value the task function returns"
        raise ConfigError("hydra.sweeper.direction", given, f"allowed: maximize or minimize, {each}")
    return given


_KINDS = ("int", "float", "categorical")


def from_search_space(search_space: Any, params: Any) -> Dict[str, Any]:
    """hydra-optuna-sweeper's deprecated ``hydra.sweeper.search_space`` (``NAME: {type, low, high, step, log,
    choices}``) as distributions, with that plugin's warnings: deprecated, or ignored when ``params`` is set too."""
    import warnings

    from hydra._internal.deprecation_warning import deprecation_warning

    url = "https://hydra.cc/docs/upgrades/1.1_to_1.2/changes_to_sweeper_config/"
    if search_space is None:
        return {}
    if params is not None:
        warnings.warn("Both hydra.sweeper.params and hydra.sweeper.search_space are configured.\nHydra will use "
                      f"hydra.sweeper.params for defining search space.\n{url}")
        return {}
    deprecation_warning(message="`hydra.sweeper.search_space` is deprecated and will be removed in the next major "
                        f"release.\nPlease configure with `hydra.sweeper.params`.\n{url}\n")
    return {str(k): _from_entry(f"hydra.sweeper.search_space.{k}", v) for k, v in search_space.items()}


def _from_entry(key: str, entry: Any) -> Any:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from ipuexp.config.errors import ConfigError

    kind = str(getattr(entry.get("type"), "name", entry.get("type")))
    low, high, step, log = entry.get("low"), entry.get("high"), entry.get("step"), bool(entry.get("log", False))
    try:
        if kind == "categorical" and entry.get("choices"):
            return CategoricalDistribution(list(entry["choices"]))
        if kind == "int":
            return IntDistribution(int(low), int(high), log=log, step=1 if log else int(step or 1))
        if kind == "float":
            return FloatDistribution(float(low), float(high), log=log, step=None if log or step is None else step)
    except (TypeError, ValueError) as err:
        raise ConfigError(key, dict(entry), f"allowed: low <= high, numbers, as Optuna takes them ({err})") from None
    raise ConfigError(key, dict(entry), f"allowed: type: {' | '.join(_KINDS)} (categorical with choices, int and "
                      "float with low and high)")
