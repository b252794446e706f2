"""The settings of ipuexp's Optuna sweeper checked before its study starts: one ConfigError line each, naming the
``hydra.sweeper.*`` key, the value and what is allowed (``python -m ipuexp`` checks them in its pre-flight, the
sweeper again before it opens the study)."""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from ipuexp.config.errors import ConfigError

STORAGE_SCHEMES = ("sqlite", "postgresql", "mysql", "oracle", "mssql")
"""Database URLs Optuna's RDB storage opens (SQLAlchemy dialects, with an optional ``+driver``)."""
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _count(key: str, value: Any, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(key, value, f"allowed: an integer >= 1 ({what})")


def check_settings(sweeper: Any) -> None:
    """``n_trials``, ``n_jobs``, ``max_failure_rate``, ``storage`` and ``custom_search_space`` of a sweeper (its
    config node or the plugin object: the same names)."""
    _count("hydra.sweeper.n_trials", sweeper.n_trials, "trials the study has when it ends")
    _count("hydra.sweeper.n_jobs", sweeper.n_jobs, "trials handed to the launcher at a time")
    rate = sweeper.max_failure_rate
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0):
        raise ConfigError("hydra.sweeper.max_failure_rate", rate, "allowed: null (the default: 1 for python -m "
                          "ipuexp, 0 for another Hydra app) or a number from 0 (stop on the first failed trial) to 1 "
                          "(go on whatever fails)")
    check_storage(sweeper.storage)
    check_custom_search_space(sweeper.custom_search_space)


def check_storage(storage: Any) -> None:
    """None, or a database URL Optuna can open; an SQLite file is checked as a tracking store's is (its folder can
    be written; an existing file is an SQLite database)."""
    if storage is None:
        return
    from ipuexp.data.paths import unwritable

    key, text = "hydra.sweeper.storage", str(storage)
    allowed = f"allowed: null (a study in memory) or a database URL: {' | '.join(STORAGE_SCHEMES)}, e.g. " \
              "sqlite:///study.db"
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.split("+", 1)[0].lower() not in STORAGE_SCHEMES:
        raise ConfigError(key, storage, allowed)
    if scheme.split("+", 1)[0].lower() != "sqlite":
        _answers(key, storage)
        return
    if not rest.startswith("/") or len(rest) < 2:
        raise ConfigError(key, storage, "allowed: sqlite:///FILE (relative to here) or sqlite:////ABSOLUTE/FILE")
    db = Path(rest[1:].split("?", 1)[0])
    db = db if db.is_absolute() else Path.cwd() / db
    reason = unwritable(db.parent)
    if reason is None and db.exists():
        try:
            with open(db, "rb") as f:
                head = f.read(len(_SQLITE_MAGIC))
            reason = None if not head or head == _SQLITE_MAGIC else f"{db} is not an SQLite database"
            if reason is None and not os.access(db, os.W_OK):
                reason = f"{db} cannot be written (its permissions)"
        except OSError as err:
            reason = f"{db} cannot be read ({err.strerror or err})"
    if reason:
        raise ConfigError(key, storage, f"allowed: a database the study can be kept in ({reason})")


def _answers(key: str, storage: Any, timeout_s: float = 10.0) -> None:
    """A database server's host and port take a connection within ``timeout_s``."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(str(storage))
    if not parts.hostname:
        return  # a local socket or the driver's default: the driver says
    port = parts.port or {"postgresql": 5432, "mysql": 3306, "mssql": 1433, "oracle": 1521}.get(
        parts.scheme.split("+", 1)[0].lower(), 0)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
    except OSError as err:
        why = "no answer" if isinstance(err, socket.timeout) else (err.strerror or str(err))
        raise ConfigError(key, storage, f"allowed: a database server that answers within {timeout_s:g} s "
                          f"({parts.hostname}:{port}: {why})") from None


def check_custom_search_space(path: Any) -> None:
    """None, or the dotted path of a callable that imports (``package.module.function``)."""
    if not path:
        return
    import importlib

    text = str(path)
    found, why = None, "not a dotted path"
    parts = text.split(".")
    for cut in range(len(parts) - 1, 0, -1):  # the longest module prefix that imports, then its attributes
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError as err:
            why = f"{type(err).__name__}: {err}"
            continue
        except Exception as err:  # the module itself fails as it loads
            why, found = f"{type(err).__name__}: {err}", None
            break
        for name in parts[cut:]:
            found = getattr(found, name, None)
        why = f"{'.'.join(parts[:cut])} has no callable {'.'.join(parts[cut:])}"
        break
    if found is None or not callable(found):
        raise ConfigError("hydra.sweeper.custom_search_space", path, "allowed: null or the dotted path of a callable "
                          f"(config, optuna.trial.Trial) -> None that can be imported ({' '.join(why.split())})")


def check_interval(key: str, start: Any, end: Any, log: bool) -> None:
    """An interval's ends as Optuna takes them: low <= high, both finite; a log interval above 0."""
    shown = f"{'tag(log, ' if log else ''}interval({start}, {end}){')' if log else ''}"
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (start, end)) or start > end:
        raise ConfigError(key, shown, "allowed: interval(low, high) with finite low <= high")
    if log and start <= 0:
        raise ConfigError(key, shown, "allowed: tag(log, interval(low, high)) with low > 0 (a log scale starts "
                          "above 0)")


def check_sampler(build: Any, grid_values: Any = None, **extra: Any) -> Any:
    """Build the sampler (Hydra's partial of it, called with ``extra``; the grid sampler with ``grid_values``) and
    return it; what Optuna refuses in its settings is one ConfigError line naming the setting, e.g.
    ``hydra.sweeper.sampler.population_size``."""
    import functools
    import re

    if not isinstance(build, functools.partial):
        return build
    target, settings = build, {}
    while isinstance(target, functools.partial):  # Hydra may wrap its partial in another
        settings = {**target.keywords, **settings}
        target = target.func
    name = getattr(target, "__name__", str(target))
    try:
        return build(grid_values, **extra) if name == "GridSampler" else build(**extra)
    except (ValueError, TypeError) as err:
        why = " ".join(str(err).split())
        named = [k for k in re.findall(r"`([A-Za-z_]+)", why) + re.findall(r"([A-Za-z_]+)=", why) if k in settings]
        if named:
            key = named[0]
            raise ConfigError(f"hydra.sweeper.sampler.{key}", settings[key],
                              f"allowed: what optuna.samplers.{name} accepts ({why})") from None
        raise ConfigError("hydra/sweeper/sampler", name, f"allowed: settings optuna.samplers.{name} accepts "
                          f"({why})") from None
