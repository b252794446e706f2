"""Swept values as a reader sees them: parameter strings (numbers, JSON lists, paths) ordered and written short.

MLflow keeps every parameter as a string, lists as JSON (``ipuexp.tracking.curated.option_value``), so one key can
hold ``0.3`` in one run and ``[0.2, 0.5, 0.5, 0.5]`` in another (``options.available_memory_proportion``).
"""
from __future__ import annotations

import json
from typing import Any, List, Optional, Tuple

LONG_TEXT = 28
"""Longer text values (paths) keep their end: the file name is what tells them apart."""


def parse(value: str) -> Any:
    """A parameter string as a number, a list or the string itself."""
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    if value.startswith("["):
        try:
            return json.loads(value)
        except ValueError:
            pass
    return value


def is_integer(value: str) -> bool:
    return isinstance(parse(value), int)


def compact(value: Optional[str]) -> str:
    """A short label: ``0.3``, ``[0.2, 0.5 x3]`` (runs of one value counted), ``.../bert/ipu_config.json``."""
    if value is None:
        return "-"
    v = parse(value)
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return "[" + ", ".join(_runs(v)) + "]"
    text = str(v)
    if len(text) <= LONG_TEXT:
        return text
    tail = text[-(LONG_TEXT - 3):]
    if "/" in tail:  # whole path components
        tail = tail[tail.index("/"):]
    return "..." + tail


def _runs(items: List[Any]) -> List[str]:
    out: List[Tuple[Any, int]] = []
    for item in items:
        if out and out[-1][0] == item:
            out[-1] = (item, out[-1][1] + 1)
        else:
            out.append((item, 1))
    return [(f"{v:g}" if isinstance(v, float) else str(v)) + (f" x{n}" if n > 1 else "") for v, n in out]


def order(value: str) -> Tuple[int, Any, str]:
    """Sort key: numbers by value, then lists (shorter first, then by their items), then text."""
    v = parse(value)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (0, v, value)
    if isinstance(v, list):
        items = [x if isinstance(x, (int, float)) else float("inf") for x in v]
        return (1, (len(v), items), value)
    return (2, 0, value)
