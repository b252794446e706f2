"""One-line configuration errors: key, value, what is allowed."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

from hydra.errors import CompactHydraException


class ConfigError(CompactHydraException, ValueError):
    """A configuration value that cannot run. ``str()`` is the one line shown to the user: Hydra prints a compact
    exception without its traceback, so a Hydra app that is not ``python -m ipuexp`` (a plugin's setting, checked
    when its sweep starts) shows that line too."""

    def __init__(self, key: str, value: Any, allowed: str):
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"{key}={value!r} is invalid: {allowed}")


def unknown_key(key: str, names: List[str]) -> str:
    """What is allowed in place of an unknown key: the nearest names (a typo's correction), else every name."""
    import difflib

    last = key.rpartition(".")[2]
    prefix = key[: len(key) - len(last)]
    near = difflib.get_close_matches(last, names, n=3, cutoff=0.75)
    if near:
        return f"unknown key; did you mean {' or '.join(prefix + n for n in near)}?"
    return f"unknown key; allowed keys here: {', '.join(names)}"


def from_omegaconf(exc: Exception, overrides: Optional[Dict[str, str]] = None) -> ConfigError:
    """Turn an OmegaConf/Hydra composition error into a ConfigError naming the full key.

    ``overrides`` maps override keys to their command-line values, so the message can show what the user typed.
    """
    overrides = overrides or {}
    from hydra.errors import MissingConfigException, OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

    if isinstance(exc, OverrideParseException):
        return unparsable(exc.override, exc.message)

    if isinstance(exc, MissingConfigException):
        group, _, name = (exc.missing_cfg_file or "?").rpartition("/")
        options = " | ".join(o for o in (exc.options or []) if not o.startswith("base_"))
        return ConfigError(group or "?", name, f"allowed: {options}")

    if isinstance(exc, OmegaConfBaseException):
        key = str(exc.full_key or getattr(exc, "key", None) or "?")
        value = overrides.get(key, overrides.get(f"+{key}", getattr(exc, "value", None)))
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, (ConfigKeyError, ConfigAttributeError)):
            owner = getattr(exc, "object_type", None)
            if dataclasses.is_dataclass(owner):
                return ConfigError(key, value, unknown_key(key, [f.name for f in dataclasses.fields(owner)]))
            return ConfigError(key, value, f"unknown key ({first})")
        return ConfigError(key, value, first)
    cause = exc.__cause__ or exc.__context__
    if cause is not None and cause is not exc:
        inner = from_omegaconf(cause, overrides)
        if inner.key != "?":
            return inner
    text = " ".join(str(exc).split())
    if "requires --multirun" in text:
        text = "allowed: one value; a sweep needs -m (--multirun)"
    for key, value in overrides.items():  # the override the message quotes, as typed
        if f"{key}={value}" in str(exc):
            return ConfigError(key, value, text)
        if not key.strip():  # "=VALUE": Hydra reads no key, and says something else
            return ConfigError("override", f"{key}={value}", f"allowed: KEY=VALUE, a key before '=' ({text})")
    return ConfigError("?", None, text)


def unparsable(override: str, message: str) -> ConfigError:
    """An override that Hydra's grammar does not parse, named as typed (``KEY=VALUE``, or the whole text)."""
    key, sep, value = str(override).partition("=")
    why = " ".join(str(message).split()).split(" See https://hydra.cc", 1)[0]
    allowed = f"allowed: KEY=VALUE in Hydra's override grammar ({why}; quote a value that holds , [ ] ( ) or =)"
    return ConfigError(key, value, allowed) if sep else ConfigError("override", override, allowed)
