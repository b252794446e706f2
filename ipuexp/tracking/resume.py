"""Resume a sweep: a configuration already FINISHED (same config hash) need not run again.

Asked for with ``tracking.skip_completed`` (any FINISHED run in the experiment counts). A multirun that re-runs
the command of a sweep that lost its Ray cluster resumes it by itself: the Hydra callback tags the new sweep's
parent run with the lost one (``RESUMES_TAG``), and a configuration FINISHED in that sweep, or in the lost attempts
it resumed in turn, is skipped.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, FrozenSet, Optional, Tuple

from omegaconf import DictConfig, OmegaConf

from ipuexp.tracking.store import client, find_experiment, retry
from ipuexp.tracking.sweep import COMMAND_TAG, LOST_TAG, RESUMES_TAG, SweepContext, children, find_parent

COMMAND_EXCLUDED = ("runner.", "tracking.skip_completed")
"""Overrides that leave what a sweep computes alone: where it runs (a re-run may join another cluster)."""

_resumed: Dict[Tuple[str, str], FrozenSet[str]] = {}
"""(tracking URI, sweep key) -> config hashes FINISHED in the lost sweeps it resumes; jobs of one sweep share it."""


def completed_run(uri: str, experiment: str, config_hash: str) -> Optional[Any]:
    """The latest FINISHED run of the configuration hashed ``config_hash`` in ``experiment``, or None."""
    c = client(uri)
    exp_id = find_experiment(c, experiment, uri)
    if exp_id is None:
        return None
    runs = retry(c.search_runs, [exp_id], max_results=1, order_by=["attributes.start_time DESC"],
                 filter_string=f"tags.config_hash = '{config_hash}' and attributes.status = 'FINISHED'")
    return runs[0] if runs else None


def resumed_points(uri: str, experiment: str, sweep: Optional[SweepContext]) -> FrozenSet[str]:
    """Config hashes FINISHED in the lost sweeps the multirun ``sweep`` resumes (empty unless it resumes one, and
    outside a multirun)."""
    if sweep is None:
        return frozenset()
    from ipuexp.tracking import recorder

    rec = recorder.for_sweep(sweep.dir)
    if rec is not None:  # what the sweep's recorder has read from the store so far
        return rec.resumed()
    key = sweep.key
    if (uri, key) not in _resumed:
        _resumed[(uri, key)] = finished_in_lost(client(uri), experiment, key)
    return _resumed[(uri, key)]


def finished_in_lost(c: Any, experiment: str, sweep_key: str) -> FrozenSet[str]:
    exp = retry(c.get_experiment_by_name, experiment)
    run = find_parent(c, [exp.experiment_id], sweep_key) if exp is not None else None
    if run is None or RESUMES_TAG not in run.data.tags:
        return frozenset()
    hashes, seen = set(), set()
    while run is not None and run.info.run_id not in seen:  # this sweep, the one it resumes, and so on
        seen.add(run.info.run_id)
        hashes.update(r.data.tags.get("config_hash") for r in
                      children(c, exp.experiment_id, run.info.run_id, "FINISHED", limit=50000))
        previous = run.data.tags.get(RESUMES_TAG)
        run = retry(c.get_run, previous) if previous and previous not in seen else None
    hashes.discard(None)
    return frozenset(hashes)


def command_key(config: DictConfig) -> str:
    """What a multirun's command computes: its task overrides (less ``COMMAND_EXCLUDED``) and the sweeper's
    parameters, hashed. Two runs of one command line have the same key."""
    overrides = [str(o) for o in OmegaConf.select(config, "hydra.overrides.task", default=[])]
    kept = sorted(o for o in overrides if not o.split("=", 1)[0].lstrip("+~").startswith(COMMAND_EXCLUDED))
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None)
    blob = json.dumps({"overrides": kept, "params": OmegaConf.to_container(params) if params is not None else None},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def lost_attempt(c: Any, experiment_id: str, key: str) -> Optional[Any]:
    """The parent run of the latest sweep of command ``key`` when that sweep lost its Ray cluster, else None."""
    runs = retry(c.search_runs, [experiment_id], filter_string=f"tags.{COMMAND_TAG} = '{key}'", max_results=1,
                 order_by=["attributes.start_time DESC"])
    return runs[0] if runs and LOST_TAG in runs[0].data.tags else None


def mark_attempt(c: Any, parent_id: str, key: str, lost: Optional[Any]) -> None:
    """Tag a sweep's parent run with its command and, when it re-runs a lost sweep, with that sweep; a parent
    re-opened in place (same sweep folder) forgets its own loss, and keeps the lost sweep it already resumes."""
    tags = retry(c.get_run, parent_id).data.tags
    retry(c.set_tag, parent_id, COMMAND_TAG, key)
    for stale in (LOST_TAG, "error"):
        if stale in tags:
            retry(c.delete_tag, parent_id, stale)
    if lost is not None and not (lost.info.run_id == parent_id and RESUMES_TAG in tags):
        retry(c.set_tag, parent_id, RESUMES_TAG, lost.info.run_id)


DRIVER_PROCESS_TAG = "sweep_driver_process"
"""Tag of a parent run its driver holds open: ``HOST:PID`` of that process, to tell a parent whose driver was killed
outright (SIGKILL skips every cleanup) from one whose driver still runs."""


def driver_process() -> str:
    import os
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"


def _gone(process: str) -> bool:
    """True when ``HOST:PID`` names a process of this host that no longer runs (another host's cannot be told)."""
    import os
    import socket

    host, _, pid = process.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process
        return False
    return False


def close_orphans(c: Any, experiment_id: str, key: str, parent_id: str) -> int:
    """End the parent runs of earlier attempts of the same command (``key``) that their driver left RUNNING when
    it was killed outright (``kill -9``): the parent and its children still RUNNING become KILLED, with the reason
    in their ``error`` tag. Returns how many parents it closed."""
    from ipuexp.tracking.identity import clip_tag
    from ipuexp.tracking.store import quoted

    runs = retry(c.search_runs, [experiment_id], max_results=1000,
                 filter_string=f"tags.{COMMAND_TAG} = {quoted(key)} and attributes.status = 'RUNNING'")
    why = ("its sweep's driver process ended without closing it (killed outright); closed when the same command "
           "ran again")
    closed = 0
    for run in runs:
        process = run.data.tags.get(DRIVER_PROCESS_TAG)
        if run.info.run_id == parent_id or not process or not _gone(process):
            continue
        for child in children(c, experiment_id, run.info.run_id, "RUNNING", limit=50000):
            retry(c.set_tag, child.info.run_id, "error", clip_tag(why))
            retry(c.set_terminated, child.info.run_id, status="KILLED")
        retry(c.set_tag, run.info.run_id, "error", clip_tag(why))
        retry(c.set_terminated, run.info.run_id, status="KILLED")
        closed += 1
    return closed
