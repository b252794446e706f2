"""Resume a sweep: a configuration already FINISHED in its experiment (same config hash) need not run again."""
from __future__ import annotations

from typing import Any, Optional

from omegaconf import DictConfig

from ipuexp.tracking.identity import config_hash
from ipuexp.tracking.store import client, experiment_name, find_experiment, retry, tracking_uri


def completed_run(cfg: DictConfig) -> Optional[Any]:
    """The latest FINISHED run of this configuration in its experiment, or None (also when tracking is off)."""
    if not cfg.tracking.enabled:
        return None
    uri = tracking_uri(cfg)
    c = client(uri)
    exp_id = find_experiment(c, experiment_name(cfg), uri)
    if exp_id is None:
        return None
    runs = retry(c.search_runs, [exp_id], max_results=1, order_by=["attributes.start_time DESC"],
                 filter_string=f"tags.config_hash = '{config_hash(cfg)}' and attributes.status = 'FINISHED'")
    return runs[0] if runs else None


def already_completed(cfg: DictConfig) -> bool:
    """True when ``tracking.skip_completed`` is set and this configuration already has a FINISHED run."""
    return bool(cfg.tracking.skip_completed) and completed_run(cfg) is not None
