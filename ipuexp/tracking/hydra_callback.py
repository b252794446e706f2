"""Hydra callback: the sweep's parent run is opened by the driver before any job starts and closed after all end.

Enabled in ``conf/config.yaml`` under ``hydra.callbacks``. Jobs work without it (they find or create the parent
under a lock in the sweep directory); with it the parent also exists before jobs on other hosts look for it, and
a child whose process died without a word (SIGKILL, a lost node) is marked KILLED when the sweep is over. When the
``ray`` launcher reports that the sweep lost its Ray cluster, the runs it cut short and the parent are FAILED with
the loss as their error, and a re-run of the same command resumes the sweep (``ipuexp.tracking.resume``).
"""
from __future__ import annotations

import logging
from typing import Any, List, Optional

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("ipuexp")

EXPERIMENT_KEYS = ("recipe", "tracking", "hydra")
"""Swept keys that may send jobs to different experiments or stores: the driver then leaves the parent to them."""


class SweepTracking(Callback):
    """Opens and closes a multirun's MLflow parent run."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        ctx = self._context(config)
        if ctx is None:
            return
        from ipuexp.tracking.identity import job_tags
        from ipuexp.tracking.resume import command_key, lost_attempt, mark_attempt
        from ipuexp.tracking.runs import PARENT_TAGS
        from ipuexp.tracking.store import client, experiment_id, experiment_name, tracking_uri
        from ipuexp.tracking.sweep import open_parent

        ctx.dir.mkdir(parents=True, exist_ok=True)
        uri = tracking_uri(config)
        c = client(uri)
        tags = job_tags(_task_config(config))
        exp = experiment_id(c, experiment_name(config), uri)
        key = command_key(config)
        lost = lost_attempt(c, exp, key)
        parent_id = open_parent(c, exp, ctx, {k: tags[k] for k in PARENT_TAGS if k in tags})
        mark_attempt(c, parent_id, key, lost)
        if lost is not None:
            log.info(f"Resuming the sweep that lost its Ray cluster (MLflow run {lost.info.run_id}): the points that "
                     "finished there are skipped")

    def on_multirun_end(self, config: DictConfig, cluster_lost: Optional[Any] = None, **kwargs: Any) -> None:
        """Close the sweep's runs; ``cluster_lost`` (``ipuexp.runner.loss.ClusterLoss``) when its cluster went away."""
        ctx = self._context(config, need_fixed_experiment=False)
        if ctx is None:
            return
        from ipuexp.tracking.store import client, retry, tracking_uri
        from ipuexp.tracking.sweep import close_parent, find_parent

        lost = cluster_lost.cause if cluster_lost is not None else None
        c = client(tracking_uri(config))
        for exp in retry(c.search_experiments):
            parent = find_parent(c, [exp.experiment_id], ctx.key)
            if parent is not None:
                close_parent(c, exp.experiment_id, parent.info.run_id, ctx, orphans_to="FAILED" if lost else "KILLED",
                             lost=lost)
        if cluster_lost is not None:  # the parent was tagged with its command when the sweep started
            cluster_lost.resume = ("re-run the same command to run only the points that did not finish"
                                   if self._context(config) is not None else "re-run the same command with "
                                   "tracking.skip_completed=true to run only the points that did not finish")

    @staticmethod
    def _context(config: DictConfig, need_fixed_experiment: bool = True) -> Optional[Any]:
        from ipuexp.tracking.store import launch_dir
        from ipuexp.tracking.sweep import SweepContext, swept_keys

        if not OmegaConf.select(config, "tracking.enabled", default=False):
            return None
        overrides: List[str] = list(OmegaConf.select(config, "hydra.overrides.task", default=[]))
        swept = swept_keys(overrides)
        if need_fixed_experiment and any(k.split(".")[0] in EXPERIMENT_KEYS for k in swept):
            return None
        sweep_dir = (launch_dir() / str(config.hydra.sweep.dir)).resolve()
        return SweepContext(dir=sweep_dir, sweep_overrides=overrides, swept_keys=swept)


def _task_config(config: DictConfig) -> DictConfig:
    """The driver's config without the ``hydra`` node, as a job sees it."""
    cfg = OmegaConf.masked_copy(config, [k for k in config.keys() if k != "hydra"])
    return cfg
