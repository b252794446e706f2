"""A sweep's other values checked against its first point's composed configuration.

``python -m ipuexp -m`` composes the first point, then each other swept value once, so that a value the schema
rejects stops the sweep before it starts. Composing takes about 0.1 s; a plain value of an ``options``, ``data`` or
``training`` key (``options.gradient_accumulation=1024``) is checked instead the way Hydra applies an override to a
composed configuration (``OmegaConf.update``, which checks the value against the schema's type), on the first
point's configuration, and put back. Anything else (a config group, ``+``/``~`` overrides, a container value) is
composed, and so is a value the quick check refuses, so that the error is the one composing gives.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

from ipuexp.config.types import ConfigNode

QUICK_KEYS = ("options.", "data.", "training.")
"""Keys whose plain values no step after composing reads (imported ipu_config options and calibrations do)."""


def check_points(cfg: ConfigNode, first: List[str], points: List[List[str]],
                 compose: Callable[[List[str]], Any]) -> None:
    """Check each of ``points`` (the first point with one override changed, as ``sweep_points`` makes them) on
    ``cfg``, the first point's composed configuration; ``compose(point)`` composes one (raising ConfigError)."""
    for point in points:
        if not _quick(cfg, first, point):
            compose(point)


def _quick(cfg: ConfigNode, first: List[str], point: List[str]) -> bool:
    """True when the one override in which ``point`` differs from ``first`` applies to ``cfg`` (left as it was)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType
    from omegaconf import Container, OmegaConf

    changed = [o for o in point if o not in first]
    if len(changed) != 1 or len(point) != len(first):
        return False
    try:
        override = OverridesParser.create().parse_override(changed[0])
    except Exception:
        return False
    key = override.key_or_group
    if override.type != OverrideType.CHANGE or override.package is not None or \
            not key.startswith(QUICK_KEYS) or override.is_sweep_override():
        return False
    old = _plain(cfg, key)
    if old is None or isinstance(override.value(), (dict, list)):
        return False
    try:
        ConfigLoaderImpl._apply_overrides_to_config([override], cfg)
        ok = not isinstance(OmegaConf.select(cfg, key), Container)
    except Exception:
        ok = False
    finally:
        OmegaConf.update(cfg, key, old[0], merge=False)
    return ok


def _plain(cfg: ConfigNode, key: str) -> Optional[tuple]:
    """``(value,)`` of ``key`` in ``cfg`` when it holds a plain value, else None."""
    from omegaconf import Container, OmegaConf

    try:
        node = OmegaConf.select(cfg, key, throw_on_missing=True)
    except Exception:
        return None
    if isinstance(node, Container) or node is None:
        return None
    return (node,)
