"""Hydra callback: the sweep's parent run is opened by the driver before any job starts and closed after all end.

Enabled in ``conf/config.yaml`` under ``hydra.callbacks``. Jobs work without it (they find or create the parent
under a lock in the sweep directory and close it as they end); with it the parent also exists before jobs on other
hosts look for it, jobs find it once per worker process and leave closing it to the driver, and a child whose
process died without a word (SIGKILL, a lost node) is marked KILLED when the sweep is over, or when the driver
itself exits early (Ctrl-C). When the ``ray`` launcher reports that the sweep lost its Ray cluster, the runs it cut
short and the parent are FAILED with the loss as their error, and a re-run of the same command resumes the sweep
(``ipuexp.tracking.resume``). At the end it logs where to compare the sweep's runs in the MLflow UI.
"""
from __future__ import annotations

import atexit
import time
from typing import Any, Optional

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ipuexp.tracking.sweep_runs import close_sweep, remove_lock, sweep_context, sweep_start


class SweepTracking(Callback):
    """Opens and closes a multirun's MLflow parent run."""

    _context = staticmethod(sweep_context)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        ctx = sweep_context(config)
        if ctx is None:
            return
        from ipuexp.tracking import recorder
        from ipuexp.tracking.resume import driver_process

        ctx.dir.mkdir(parents=True, exist_ok=True)
        driver, start_ms = driver_process(), int(time.time() * 1000)
        spec = ("sweep", config, ctx, driver, start_ms)
        if not (deferrable(config) and recorder.defer(ctx.dir, spec, lambda: _start_here(config, ctx, driver,
                                                                                         start_ms))):
            _start_here(config, ctx, driver, start_ms)

    def on_multirun_end(self, config: DictConfig, cluster_lost: Optional[Any] = None, **kwargs: Any) -> None:
        """Close the sweep's runs; ``cluster_lost`` (``ipuexp.runner.loss.ClusterLoss``) when its cluster went away."""
        from ipuexp.tracking import recorder

        if cluster_lost is None and recorder.finish("end"):  # the recorder closed them
            return
        close_sweep(config, cluster_lost)


def _start_here(config: DictConfig, ctx: Any, driver: str, start_ms: int) -> None:
    """The sweep's start in the driver, with its exit nets."""
    from ipuexp.tracking import safety
    from ipuexp.tracking.store import client
    from ipuexp.tracking.sweep import release_parent

    s = sweep_start(config, ctx, driver, start_ms, resumed=False)
    # The jobs' lock goes with the sweep however it ends (a failed point or Ctrl-C skips on_multirun_end);
    # registered first, it runs after the net below, which takes the lock once more.
    atexit.register(remove_lock, ctx)
    # An early exit of the driver skips on_multirun_end: its atexit net ends the parent and its stale children.
    c = client(s.uri)
    safety.register(s.parent_id, lambda status: release_parent(c, s.experiment_id, s.parent_id, ctx,
                                                               orphans_to=status))


def records_aside(config: DictConfig, points: int) -> bool:
    """Whether a sweep of ``points`` will leave its MLflow work to a recorder: tracked, this callback configured, a
    fixed experiment, ``deferrable`` and run in this process (``ipuexp.runner.placement``)."""
    from types import SimpleNamespace

    from ipuexp.runner.placement import functional, in_process

    callbacks = OmegaConf.select(config, "hydra.callbacks", default=None) or {}
    if not any(str(cb.get("_target_", "")).endswith(".SweepTracking") for cb in callbacks.values()):
        return False
    if sweep_context(config) is None or not deferrable(config):
        return False
    launcher = config.hydra.launcher
    return in_process(SimpleNamespace(address=launcher.get("address")), launcher.get("runtime_env"),
                      int(launcher.get("in_process_below", 0)), points,
                      functional(config, [list(config.hydra.overrides.task)])) is not None


def deferrable(config: DictConfig) -> bool:
    """Whether the sweep's MLflow work may go to a recorder (:mod:`ipuexp.tracking.recorder`): ipuexp's launcher
    (which hands it over when it runs the jobs here), a grid sweeper, jobs that do not ask the store first."""
    from ipuexp.config.sweep_points import GRID_SWEEPERS

    launcher = str(OmegaConf.select(config, "hydra.launcher._target_", default=""))
    sweeper = OmegaConf.select(config, "hydra.runtime.choices", default={}).get("hydra/sweeper")
    return (launcher == "hydra_plugins.ipuexp.ray_launcher.RayLauncher" and sweeper in GRID_SWEEPERS
            and not OmegaConf.select(config, "tracking.skip_completed", default=False))


