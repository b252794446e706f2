"""The points of a sweep that ``python -m ipuexp -m`` checks before Hydra starts it: every swept value once (the
first point, then that point with one swept key set to each of its other values), and for an optimisation sweeper
the values of its search space."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Sequence

if TYPE_CHECKING:
    from ipuexp.config.types import ConfigNode

GRID_SWEEPERS = ("basic", "ipuexp")
"""``hydra/sweeper`` choices that run every point they are given and read no objective; any other sweeper (``optuna``,
``nevergrad``, ``ax``) optimises ``float(JobReturn.return_value)``."""


def _axis(override: Any) -> List[str]:
    """The values of one parsed override to check: each value of a choice or range sweep, both ends of an
    interval (an optimisation sweeper's continuous search space: ``interval(0.1,0.4)``, ``tag(log,interval(...))``)."""
    from ipuexp.config.errors import ConfigError

    key = override.get_key_element()
    if not override.is_sweep_override():
        return [override.input_line]
    if key.lstrip("+~").startswith("hydra."):
        raise ConfigError(key, override.get_value_element_as_str(), "allowed: one value (Hydra sweeps no hydra.* key); "
                          "an optimisation sweeper's search space goes on the key itself or, quoted, in "
                          "hydra.sweeper.params (e.g. 'hydra.sweeper.params.NAME=\"choice(1,2)\"')")
    if override.is_interval_sweep():
        value = override.value()
        return [f"{key}={value.start}", f"{key}={value.end}"]
    try:
        values = [f"{key}={v}" for v in override.sweep_string_iterator()]
    except Exception as err:  # range(1,5,0), glob() of a key that is no config group, ...
        why = " ".join(str(err).split())
        raise ConfigError(key, override.input_line.split("=", 1)[-1], f"allowed: a sweep Hydra can list ({why}; "
                          "glob() lists a config group's options, e.g. system=glob(pod*))") from None
    if not values:
        text = override.input_line.split("=", 1)[-1]
        raise ConfigError(key, text, "allowed: a glob() matching options of a config group (e.g. system=glob(pod*))"
                          if text.lstrip().startswith("glob(") else "allowed: a sweep of at least one value "
                          "(range(a,b) needs b > a for a positive step, b < a for a negative one)")
    return values


def sweep_points(overrides: List[str]) -> List[List[str]]:
    """The sweep points that try every swept value once: the first point, then that point with one swept key set
    to each of its other values (``a=1,2 b=x,y`` gives ``a=1 b=x``, ``a=2 b=x``, ``a=1 b=y``). An interval
    (``interval(0.1,0.4)``, for an optimisation sweeper) is tried at both ends."""
    swept = axes(overrides)
    first = [axis[0] for axis in swept]
    return [first] + [first[:i] + [value] + first[i + 1:] for i, axis in enumerate(swept) for value in axis[1:]]


def axes(overrides: List[str]) -> List[List[str]]:
    """Each override's values to check (``_axis``), in order."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    from ipuexp.config.errors import unparsable

    try:
        parsed = OverridesParser.create(config_loader=_config_loader()).parse_overrides(overrides)
    except OverrideParseException as exc:
        raise unparsable(exc.override, exc.message) from None
    return [_axis(ov) for ov in parsed]


def _config_loader() -> Any:
    """Hydra's config loader over ipuexp's configs: what ``glob()`` sweeps list a config group's options from."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path

    from ipuexp.config.store import CONF_PATH, register

    register()
    return ConfigLoaderImpl(config_search_path=create_config_search_path(CONF_PATH))


def search_space_points(cfg: ConfigNode, first: List[str], overrides: Sequence[str] = ()) -> List[List[str]]:
    """For an optimisation sweeper, the first point with each value of ``hydra.sweeper.params`` (a preset's or a
    quoted command-line search space) that the command line does not replace: Hydra's basic sweeper's params
    are the command line's sweeps once the sweep starts, an optimisation sweeper's are its search space. And the
    first point with each range's stop, which ipuexp's Optuna sweeper samples too (as hydra-optuna-sweeper reads
    ``range``), though Hydra's list of a range's values ends before it."""
    if "sweeper" not in cfg.hydra or cfg.hydra.runtime.choices.get("hydra/sweeper") in GRID_SWEEPERS:
        return []
    params = cfg.hydra.sweeper.get("params") or {}
    given = {o.split("=", 1)[0].lstrip("+~") for o in first}
    space = [f"{k}={v}" for k, v in params.items() if str(k) not in given]
    points = [first + [value] for point in sweep_points(space) for value in point] if space else []
    return points + _range_stops(first, list(overrides) + space)


def _range_stops(first: List[str], overrides: List[str]) -> List[List[str]]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    points = []
    for override in OverridesParser.create().parse_overrides(overrides):
        if override.is_range_sweep() and not override.value().shuffle:
            key = override.get_key_element()
            points.append([o for o in first if o.split("=", 1)[0] != key] + [f"{key}={override.value().stop}"])
    return points
