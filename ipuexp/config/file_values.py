"""Values read from a configuration file (an Optimum ``ipu_config.json``, a Graphcore application's YAML or JSON):
each parsed into the schema's type, or refused on one line naming the key, the value and what is allowed."""
from __future__ import annotations

from typing import Any, List, Mapping, Sequence

from ipuexp.config.errors import ConfigError


def refuse(key: str, value: Any, why: str) -> ConfigError:
    """The one-line refusal of a key ipuexp cannot map."""
    return ConfigError(key, value, why)


def as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.lower() in ("true", "1", "yes")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise refuse(key, value, "allowed: true or false")


def as_int(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise refuse(key, value, "allowed: an integer")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise refuse(key, value, "allowed: an integer") from None
    if number != int(number):
        raise refuse(key, value, "allowed: an integer")
    return int(number)


def as_float(key: str, value: Any) -> float:
    if isinstance(value, bool):
        raise refuse(key, value, "allowed: a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise refuse(key, value, "allowed: a number") from None


def as_int_list(key: str, value: Any) -> List[int]:
    items = value if isinstance(value, (list, tuple)) else [value]
    return [as_int(key, v) for v in items]


def as_proportion(key: str, value: Any) -> Any:
    """A matmul proportion: one number, or one per IPU (a one-element list stays a list)."""
    if isinstance(value, (list, tuple)):
        return [as_float(key, v) for v in value]
    return as_float(key, value)


def choose(key: str, value: Any, table: Mapping[Any, Any]) -> Any:
    """``table[value]`` (strings compared case-insensitively), else a refusal listing the keys of ``table``."""
    lookup = {str(k).lower(): v for k, v in table.items()}
    found = lookup.get(str(value).lower())
    if found is None:
        raise refuse(key, value, f"allowed: {' | '.join(str(k) for k in table)}")
    return found


def one_line(items: Sequence[str], limit: int = 40) -> str:
    shown = list(items[:limit])
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")
