"""Functional engine: real training numerics under the configured pipelining, replication, accumulation,
precision and instances. ``run_functional(exp, tracker, out_dir)`` trains, checkpoints and evaluates."""
from __future__ import annotations

from typing import Any


def run_functional(*args: Any, **kwargs: Any) -> Any:
    """See :func:`ipuexp.training.run.run_functional`."""
    from ipuexp.training.run import run_functional as run

    return run(*args, **kwargs)


__all__ = ["run_functional"]
