"""Where the ``ipuexp`` launcher runs a sweep: in this process, or on Ray.

A local Ray costs a start-up of its own (its processes, the sweep's driver, each worker's imports: 5 to 9 s on a
2-core machine) that only jobs run side by side can win back, and the launcher composes every job in one process
either way. An analytic job takes about 0.14 s, so on the 2-core machine of the README's measurements ("Sweeps")
Ray lost below ``IN_PROCESS_BELOW`` points and drew even there: a smaller sweep of analytic jobs runs here, one job
after another. A functional-engine job trains for real (about 70 s for ``mnist_pipeline`` there), against which
Ray's start-up is small, so such a sweep always runs on Ray, as does one given a Ray address, a Ray runtime
environment for its jobs, or one whose process already drives a Ray: those ask for Ray by name.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Optional, Sequence

if TYPE_CHECKING:
    from ipuexp.config.types import ConfigNode

IN_PROCESS_BELOW = 100
"""Default ``hydra.launcher.in_process_below`` of the ``ipuexp`` launcher (``ray``: 0, always Ray)."""

KEY = "hydra.launcher.in_process_below"


def in_process(settings: Any, runtime_env: Any, below: int, points: int, functional: bool = False) -> Optional[str]:
    """Why a sweep of ``points`` runs in this process, or None when it runs on Ray."""
    if settings.address or os.environ.get("RAY_ADDRESS") or runtime_env or _ray_running():
        return None
    if functional or points >= below:
        return None
    return (f"{points} point{'s' if points != 1 else ''}, fewer than {KEY}={below}: a local Ray's start-up costs "
            "more than running them side by side saves")


def functional(config: ConfigNode, job_overrides: Sequence[Sequence[str]]) -> bool:
    """Whether the sweep trains with the functional engine (``engine.mode``: the sweep's own, or a point's)."""
    from omegaconf import OmegaConf

    try:
        mode = OmegaConf.select(config, "engine.mode", default=None)
    except Exception:  # an interpolation the sweep's configuration cannot resolve alone: the points say
        mode = None
    if str(getattr(mode, "value", mode)) == "functional":
        return True
    return any(ov.lstrip("+~") == "engine.mode=functional" for overrides in job_overrides for ov in overrides)


def check(below: Any) -> None:
    """Refuse a threshold that is not a count (one line naming the key)."""
    from ipuexp.config.errors import ConfigError

    if isinstance(below, bool) or not isinstance(below, int) or below < 0:
        raise ConfigError(KEY, below, "allowed: an integer >= 0 (sweeps with fewer points run in this process; "
                                      "0: every sweep on Ray)")


def check_launcher(launcher: Any) -> None:
    """The ``hydra.launcher`` node's threshold, when its launcher has one (ipuexp's)."""
    if "in_process_below" in launcher:
        check(launcher.in_process_below)


def _ray_running() -> bool:
    ray = sys.modules.get("ray")  # never imported here just to ask
    return ray is not None and ray.is_initialized()
