"""The value look-up and range checks every validation rule uses; each failed check is one ConfigError line."""
from __future__ import annotations

import math
from enum import Enum
from typing import Any, List, Sequence

from omegaconf import DictConfig, ListConfig, OmegaConf

from ipuexp.config.errors import ConfigError
from ipuexp.config.types import AnyConfig

Warnings = List[str]


def value_at(cfg: AnyConfig, key: str) -> Any:
    """The plain value (enums as their values, lists as lists) at a dotted ``key`` of a config or object."""
    node = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return plain(node)


def plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (ListConfig, DictConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def int_at_least(cfg: AnyConfig, key: str, low: int, why: str = "") -> int:
    value = value_at(cfg, key)
    if not is_int(value) or value < low:
        raise ConfigError(key, value, f"allowed: an integer >= {low}{why}")
    return value


def positive(cfg: AnyConfig, key: str, why: str = "") -> float:
    value = value_at(cfg, key)
    if not is_number(value) or value <= 0:
        raise ConfigError(key, value, f"allowed: a number > 0{why}")
    return value


def one_of(cfg: AnyConfig, key: str, allowed: Sequence[str], why: str = "") -> str:
    value = value_at(cfg, key)
    if value not in allowed:
        raise ConfigError(key, value, f"allowed: {' | '.join(allowed)}{why}")
    return value


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0
