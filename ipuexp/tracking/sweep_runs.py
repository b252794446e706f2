"""A sweep's MLflow parent run through its life: opened as the sweep starts (resuming a lost sweep of the same
command, closing the parents a killed driver left RUNNING), closed when it ends, with where to compare its runs.
The Hydra callback (:mod:`ipuexp.tracking.hydra_callback`) does this in the driver, or the sweep's recorder
(:mod:`ipuexp.tracking.recorder_loop`) does it beside the jobs."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, List, Optional

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("ipuexp")

EXPERIMENT_KEYS = ("recipe", "tracking", "hydra")
"""Swept keys that may send jobs to different experiments or stores: the driver then leaves the parent to them."""


def sweep_context(config: DictConfig, need_fixed_experiment: bool = True) -> Optional[Any]:
    """The sweep's context (its folder, overrides, swept keys) when it is tracked; with ``need_fixed_experiment``,
    None when the sweep varies its experiment or store (``EXPERIMENT_KEYS``)."""
    from ipuexp.tracking.store import launch_dir
    from ipuexp.tracking.sweep import SweepContext, swept_keys, sweep_definition

    if not OmegaConf.select(config, "tracking.enabled", default=False):
        return None
    overrides = sweep_definition(OmegaConf.select(config, "hydra.overrides.task", default=[]),
                                 OmegaConf.select(config, "hydra.sweeper.params", default=None))
    swept = swept_keys(overrides)
    if need_fixed_experiment and any(k.split(".")[0] in EXPERIMENT_KEYS for k in swept):
        return None
    sweep_dir = (launch_dir() / str(config.hydra.sweep.dir)).resolve()
    return SweepContext(dir=sweep_dir, sweep_overrides=overrides, swept_keys=swept)


def close_sweep(config: DictConfig, cluster_lost: Optional[Any] = None) -> None:
    """Close the sweep's runs (the callback's ``on_multirun_end``) and say where to compare them."""
    ctx = sweep_context(config, need_fixed_experiment=False)
    if ctx is None:
        return
    from ipuexp.tracking import safety
    from ipuexp.tracking.store import checkpoint, client, retry, tracking_uri
    from ipuexp.tracking.sweep import DRIVER_TAG, close_parent, find_parent, release_parent

    lost = cluster_lost.cause if cluster_lost is not None else None
    orphans_to = "FAILED" if lost else "KILLED"
    uri = tracking_uri(config)
    c = client(uri)
    for exp in retry(c.search_experiments):
        parent = find_parent(c, [exp.experiment_id], ctx.key)
        if parent is None:
            continue
        if DRIVER_TAG in parent.data.tags:
            release_parent(c, exp.experiment_id, parent.info.run_id, ctx, orphans_to=orphans_to, lost=lost)
        else:  # jobs opened it (their experiment was swept): they closed it, save for the silent deaths
            close_parent(c, exp.experiment_id, parent.info.run_id, ctx, orphans_to=orphans_to, lost=lost)
        safety.unregister(parent.info.run_id)
        log_links(c, uri, exp, parent.info.run_id, OmegaConf.select(config, "tracking.ui_url"), ctx.dir)
    remove_lock(ctx)
    checkpoint(uri)  # the sweep's runs in mlflow.db itself, not only in its write-ahead log
    if cluster_lost is not None:  # the parent was tagged with its command when the sweep started
        cluster_lost.resume = ("re-run the same command to run only the points that did not finish"
                               if sweep_context(config) is not None else "re-run the same command with "
                               "tracking.skip_completed=true to run only the points that did not finish")


def sweep_end(config: DictConfig, ctx: Any, how: str, started: Any) -> None:
    """The sweep's end in its recorder: ``end``, the sweep is over (as ``on_multirun_end``); ``KILLED``, the driver
    exits early (Ctrl-C): its stale children are KILLED, without the links; ``gone``, the driver ended without a
    word (``kill -9``), and so is the parent run."""
    from ipuexp.tracking.store import checkpoint, client, retry
    from ipuexp.tracking.sweep import release_parent

    if how == "end":
        close_sweep(config)
        return
    c = client(started.uri)
    release_parent(c, started.experiment_id, started.parent_id, ctx, orphans_to="KILLED")
    if how == "gone":
        retry(c.set_tag, started.parent_id, "error", "its sweep's driver process ended without closing it")
        retry(c.set_terminated, started.parent_id, status="KILLED")
    remove_lock(ctx)
    checkpoint(started.uri)


def sweep_start(config: DictConfig, ctx: Any, driver: str, start_ms: int, resumed: bool) -> Any:
    """Open the sweep's parent run (the driver's), as the sweep starts: tag it with its command, resume a lost
    sweep of that command, close the parents a killed driver left RUNNING. ``resumed``: also read the config hashes
    that the lost sweep finished (for a recorder, whose jobs do not look them up themselves)."""
    from ipuexp.tracking.identity import job_tags
    from ipuexp.tracking.record import Started
    from ipuexp.tracking.resume import (DRIVER_PROCESS_TAG, close_orphans, command_key, finished_in_lost,
                                        lost_attempt, mark_attempt)
    from ipuexp.tracking.runs import PARENT_TAGS
    from ipuexp.tracking.store import client, experiment_id, experiment_name, retry, tracking_uri
    from ipuexp.tracking.sweep import open_parent

    uri = tracking_uri(config)
    c = client(uri)
    exp = experiment_id(c, experiment_name(config), uri)
    tags = job_tags(task_config(config))
    key = command_key(config)
    lost = lost_attempt(c, exp, key)
    parent = open_parent(c, exp, ctx, {k: tags[k] for k in PARENT_TAGS if k in tags}, driver=True, start_ms=start_ms)
    mark_attempt(c, parent, key, lost)
    retry(c.set_tag, parent, DRIVER_PROCESS_TAG, driver)
    closed = close_orphans(c, exp, key, parent)
    if closed:
        log.info(f"Closed {closed} parent run{'s' if closed > 1 else ''} of this command left RUNNING by a driver "
                 "that was killed outright (now KILLED)")
    if lost is not None:
        log.info(f"Resuming the sweep that lost its Ray cluster (MLflow run {lost.info.run_id}): the points that "
                 "finished there are skipped")
    finished = finished_in_lost(c, experiment_name(config), ctx.key) if resumed and lost is not None else frozenset()
    return Started(uri=uri, experiment_id=exp, parent_id=parent, resumed=finished)


def remove_lock(ctx: Any) -> None:
    """The lock that serialises the sweep's jobs opening its parent run is the sweep's own: gone with the sweep."""
    from ipuexp.tracking.sweep import LOCK_NAME

    try:
        (ctx.dir / LOCK_NAME).unlink()
    except FileNotFoundError:
        pass


COMPARE_PAGE = "mlflow_compare.html"
"""The sweep folder's page that opens MLflow's comparison of its runs, whose address (every run id in it) is too long
for a line of the console."""


def log_links(c: Any, uri: str, exp: Any, parent_id: str, ui_url: Optional[str] = None,
              sweep_dir: Optional[Path] = None) -> None:
    """Where the MLflow UI shows the sweep: its runs side by side, and the experiment's runs table."""
    from ipuexp.tracking.links import compare_url, experiment_url, serve_hint, ui_base
    from ipuexp.tracking.sweep import children

    base = (ui_url or "").rstrip("/") or ui_base(uri)
    if base is None:
        return
    runs: List[Any] = sorted(children(c, exp.experiment_id, parent_id, None, limit=50000),
                             key=lambda r: r.info.start_time)
    from ipuexp.runner.summary import log_lines

    hint = serve_hint(uri)
    if hint and not ui_url:
        hint += "; on another port P, add tracking.ui_url=http://127.0.0.1:P to the sweep's command"
    # The words wrap to the terminal; an address stays whole on a line of its own, to be clicked or copied.
    log.info(log_lines(f"MLflow experiment {exp.name!r}" + (f" (serve it with: {hint})" if hint else "") + ":")
             + f"\n    {experiment_url(base, exp.experiment_id)}")
    if not runs:
        return
    url = compare_url(base, exp.experiment_id, [r.info.run_id for r in runs])
    page = _compare_page(url, sweep_dir, exp.name) if len(runs) > 1 else None
    if page is None:
        log.info(f"Compare the sweep's {len(runs)} runs:\n    {url}")
    else:
        log.info(log_lines(f"Compare the sweep's {len(runs)} runs: open {page} (MLflow's comparison; its address "
                           f"names every run, {len(url):,} characters)"))


def _compare_page(url: str, sweep_dir: Optional[Path], name: str) -> Optional[str]:
    """Write the page that opens ``url`` into the sweep folder; its path as the user reaches it (relative to the
    launch folder when inside it), or None when it cannot be written."""
    import html

    from ipuexp.files import write_whole

    if sweep_dir is None:
        return None
    path = Path(sweep_dir) / COMPARE_PAGE
    link = html.escape(url, quote=True)
    try:
        write_whole(path, f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0; url={link}">'
                          f'<title>{html.escape(name)}: compare runs</title><a href="{link}">Compare the runs in '
                          f"MLflow</a>\n")
    except OSError:
        return None
    from ipuexp.tracking.store import launch_dir

    try:
        return str(path.resolve().relative_to(launch_dir().resolve()))
    except ValueError:
        return str(path.resolve())


def task_config(config: DictConfig) -> DictConfig:
    """The driver's config without the ``hydra`` node, as a job sees it."""
    cfg = OmegaConf.masked_copy(config, [k for k in config.keys() if k != "hydra"])
    return cfg
