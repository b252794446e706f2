"""The value look-up and range checks every validation rule uses; each failed check is one ConfigError line."""
from __future__ import annotations

import functools
import math
import operator
import re
from enum import Enum
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence

from omegaconf import DictConfig, ListConfig, OmegaConf

from ipuexp.config.errors import ConfigError
from ipuexp.config.types import AnyConfig

Warnings = List[str]


def value_at(cfg: AnyConfig, key: str) -> Any:
    """The plain value (enums as their values, lists as lists) at a dotted ``key`` of a config or object."""
    return plain(_getter(key)(cfg))


@functools.lru_cache(maxsize=None)
def _getter(key: str) -> Callable[[Any], Any]:
    """``getattr`` along a dotted key, in one call (the planner checks a hundred keys per candidate)."""
    return operator.attrgetter(key)


_SCALARS = frozenset((int, float, str, bool, type(None)))


def plain(value: Any) -> Any:
    if type(value) in _SCALARS:  # most values: skip the abstract-class checks below
        return value
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


TRACKING_SCHEMES = ("file", "sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks")
"""Store URI schemes MLflow's tracking client accepts (file and database stores, tracking servers, Databricks)."""


def check_uri(key: str, uri: Any) -> None:
    """A tracking URI (``tracking.uri``, a command's ``--uri``): a path, or a URI with a scheme MLflow can open and
    what that scheme needs (``sqlite:///FILE``, a server's host)."""
    if uri is None:
        return
    text = str(uri)
    head, sep, rest = text.partition(":")
    scheme = head.split("+", 1)[0].lower() if sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", head) else "file"
    allowed = f"allowed: a path or a URI with scheme {' | '.join(TRACKING_SCHEMES)}"
    if not text.strip() or "\0" in text or scheme not in TRACKING_SCHEMES:
        raise ConfigError(key, uri, allowed)
    if scheme == "sqlite" and (not rest.startswith("///") or len(rest) <= 3):
        raise ConfigError(key, uri, "allowed: sqlite:///FILE (relative to here) or sqlite:////ABSOLUTE/FILE")
    if scheme in ("http", "https") and not rest.startswith("//") or scheme in ("http", "https") and not rest[2:]:
        raise ConfigError(key, uri, f"allowed: {scheme}://HOST[:PORT] (a tracking server's address)")


def check_uri_or_env(key: str, uri: Any) -> None:
    """``uri`` as given for ``key``, else ``MLFLOW_TRACKING_URI``, which MLflow then uses."""
    import os

    if uri is None:
        check_uri("MLFLOW_TRACKING_URI", os.environ.get("MLFLOW_TRACKING_URI") or None)
    else:
        check_uri(key, uri)


def check_writable(key: str, folder: Optional[Any], why: str = "") -> None:
    """A folder a command writes into: one line now, not a traceback after the work."""
    from ipuexp.data.paths import unwritable

    if folder is None:
        return
    reason = unwritable(Path(str(folder)))
    if reason:
        raise ConfigError(key, str(folder), f"allowed: a folder that can be written ({reason}){why}")
