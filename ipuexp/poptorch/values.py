"""The values PopTorch's setters take, checked as they are set: a bad one is the ``config error`` line naming the
call, the value and what is allowed, before any batch arithmetic divides by it."""
from __future__ import annotations

import enum
from typing import Any, Type, TypeVar

E = TypeVar("E", bound=enum.Enum)


def _refuse(call: str, value: Any, allowed: str) -> Exception:
    # imported here: ConfigError is a Hydra exception, and ``import poptorch`` loads neither Hydra nor OmegaConf
    from ipuexp.config.errors import ConfigError

    return ConfigError(call, value, allowed)


def positive_int(call: str, value: Any, key: str) -> int:
    """``value`` as an integer of at least 1; ``key`` is the ipuexp key the call maps to."""
    if isinstance(value, bool) or not isinstance(value, int) and not _integral(value) or int(value) < 1:
        raise _refuse(call, value, f"allowed: an integer >= 1 ({key})")
    return int(value)


def member(call: str, value: Any, kind: Type[E], allowed: str) -> E:
    """``value`` as a member of the enumeration ``kind`` (by member or by its number); ``allowed`` names the
    members the call supports."""
    try:
        return kind(value)
    except ValueError:
        raise _refuse(call, value, f"allowed: {allowed}") from None


def _integral(value: Any) -> bool:
    try:
        return float(value) == int(value)
    except (TypeError, ValueError, OverflowError):
        return False
