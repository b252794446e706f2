"""A multirun as one MLflow parent run with a nested child run per job.

The parent is keyed by the sweep directory (unique per Hydra multirun). Jobs find or create it under a file lock
in that directory, so parallel jobs on one machine agree on a single parent whatever launcher started them; the
Hydra callback in :mod:`ipuexp.tracking.hydra_callback` creates it in the driver before any job starts, which
also covers jobs on other hosts, and marks the parent as its own to close (``sweep_driver`` tag): jobs then leave
it alone, and a worker process finds it once for all its jobs. Without the callback the parent is RUNNING while any
child is and takes its children's outcome when the last one ends, which each job checks as it ends.

A job's run is named after the keys the sweep varies: those given several values on the command line and those of
a preset's ``hydra.sweeper.params`` (``+sweep=ga_di_io``), with the values of the job's own overrides.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ipuexp.tracking.identity import clip_tag
from ipuexp.tracking.store import file_lock, retry

SWEEP_KEY_TAG = "sweep_key"
"""Tag that marks (only) a parent run: sha of its sweep directory."""
PARENT_TAG = "mlflow.parentRunId"
"""MLflow's nesting tag; the UI folds children under their parent."""
NAME_EXCLUDED = ("recipe", "tracking", "runner", "hydra")
"""Override keys (and their prefixes) that never name a run: they are the experiment or the plumbing."""
MAX_RUN_NAME = 250
"""Length of MLflow's ``runs.name`` column."""
DRIVER_TAG = "sweep_driver"
"""Marks a parent that the driver's Hydra callback opened and will close."""
LOCK_NAME = ".mlflow-sweep.lock"
LOST_TAG = "sweep_lost"
"""Tag of a parent run whose sweep lost its Ray cluster: the run stays FAILED, and a re-run of the same command
resumes the sweep."""
COMMAND_TAG = "sweep_command"
"""Tag of a parent run: hash of what the sweep's command computes (``ipuexp.tracking.resume.command_key``)."""
RESUMES_TAG = "resumes"
"""Tag of a parent run that resumes a lost sweep: that sweep's parent run id (its own when re-run in place)."""
_definitions: Dict[Path, Tuple[List[str], Optional[List[str]]]] = {}
_parents: Dict[Tuple[str, str], str] = {}


@dataclass
class SweepContext:
    """Where a job sits in a Hydra multirun."""

    dir: Path
    """Absolute sweep directory (``hydra.sweep.dir``)."""
    job_overrides: List[str] = field(default_factory=list)
    """This job's task overrides (``hydra.overrides.task``)."""
    swept_keys: Optional[List[str]] = None
    """Keys the sweep gives several values (command line or a preset's sweeper params); None when unknown."""
    sweep_overrides: List[str] = field(default_factory=list)
    """The task overrides of the whole sweep (``a=1,2 b=x``): a preset's sweeper params, then the command line."""

    @property
    def key(self) -> str:
        return hashlib.sha256(str(self.dir).encode()).hexdigest()[:16]

    @property
    def name(self) -> str:
        swept = [o for o in self.sweep_overrides if _key(o) in (self.swept_keys or [])]
        return _clip("sweep " + (" ".join(swept) if swept else self.dir.name))

    @classmethod
    def from_hydra(cls) -> Optional["SweepContext"]:
        """The context of the current Hydra job, or None outside a multirun."""
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        if not HydraConfig.initialized():
            return None
        hc = HydraConfig.get()
        if hc.mode != RunMode.MULTIRUN:
            return None
        from ipuexp.tracking.store import launch_dir

        sweep_dir = launch_dir() / str(hc.sweep.dir)
        ctx = cls(dir=sweep_dir.resolve(), job_overrides=list(hc.overrides.task))
        ctx.sweep_overrides, ctx.swept_keys = read_sweep_overrides(ctx.dir)
        return ctx


def read_sweep_overrides(sweep_dir: Path) -> Tuple[List[str], Optional[List[str]]]:
    """The sweep's overrides and swept keys from ``multirun.yaml`` (written by Hydra's sweeper before any job
    starts); read once per process and sweep."""
    if sweep_dir not in _definitions:
        from omegaconf import OmegaConf

        path = sweep_dir / "multirun.yaml"
        if not path.is_file():
            return [], None
        config = OmegaConf.load(path)
        overrides = sweep_definition(OmegaConf.select(config, "hydra.overrides.task", default=[]),
                                     OmegaConf.select(config, "hydra.sweeper.params", default=None))
        _definitions[sweep_dir] = (overrides, swept_keys(overrides))
    overrides, keys = _definitions[sweep_dir]
    return list(overrides), None if keys is None else list(keys)


def sweep_definition(task_overrides: Any, sweeper_params: Optional[Mapping[str, Any]] = None) -> List[str]:
    """The overrides Hydra's basic sweeper expands: ``hydra.sweeper.params`` as ``key=values``, then the command
    line, a key given twice taking its last value."""
    merged: Dict[str, str] = {}
    for override in [f"{k}={v}" for k, v in (sweeper_params or {}).items()] + [str(o) for o in task_overrides]:
        merged.pop(_key(override), None)
        merged[_key(override)] = override
    return list(merged.values())


def swept_keys(overrides: List[str]) -> List[str]:
    """Keys of the overrides that take several values (``a=1,2``, ``b=range(3)``), as Hydra parses them."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return [o.get_key_element().lstrip("+~") for o in OverridesParser.create().parse_overrides(overrides)
            if o.is_sweep_override()]


def varied(overrides: List[str], swept: Optional[List[str]] = None) -> List[Tuple[str, str]]:
    """``(key, value)`` of a job's overrides that say what varies: the swept keys (else every override), less the
    plumbing (``NAME_EXCLUDED``)."""
    pairs = [(_key(o), o.split("=", 1)[1]) for o in overrides if "=" in o]
    if swept is not None:
        pairs = [(k, v) for k, v in pairs if k in swept]
    return [(k, v) for k, v in pairs if not any(k == x or k.startswith(x + ".") for x in NAME_EXCLUDED)]


def run_name(overrides: List[str], swept: Optional[List[str]] = None, fallback: str = "") -> str:
    """``gradient_accumulation=256,num_io_tiles=32``: the :func:`varied` overrides of a job."""
    pairs = varied(overrides, swept)
    if not pairs:
        return _clip(fallback)
    short = [k.rsplit(".", 1)[-1] for k, _ in pairs]
    keys = short if len(set(short)) == len(short) else [k for k, _ in pairs]
    return _clip(",".join(f"{k}={v}" for k, (_, v) in zip(keys, pairs)))


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _clip(name: str) -> str:
    return name[:MAX_RUN_NAME]


def find_parent(client: Any, experiment_ids: List[str], key: str) -> Optional[Any]:
    """The oldest parent run of sweep ``key`` in the given experiments, or None."""
    runs = retry(client.search_runs, experiment_ids, filter_string=f"tags.{SWEEP_KEY_TAG} = '{key}'",
                 max_results=1, order_by=["attributes.start_time ASC"])
    return runs[0] if runs else None


def open_parent(client: Any, experiment_id: str, sweep: SweepContext, tags: Dict[str, str],
                driver: bool = False, start_ms: Optional[int] = None) -> str:
    """Find or create the sweep's parent run and mark it RUNNING; one process at a time per sweep directory.

    ``driver``: the caller (the sweep's driver) closes the parent once the sweep is over, not its jobs.
    ``start_ms``: when the sweep started (ms since the epoch), for a parent created later (default now)."""
    with file_lock(sweep.dir / LOCK_NAME):
        run = find_parent(client, [experiment_id], sweep.key)
        if run is None:
            all_tags = {**tags, SWEEP_KEY_TAG: sweep.key, "sweep_dir": str(sweep.dir),
                        "sweep_overrides": " ".join(sweep.sweep_overrides)}
            if driver:
                all_tags[DRIVER_TAG] = "true"
            run = retry(client.create_run, experiment_id, run_name=sweep.name, tags=all_tags, start_time=start_ms)
        else:
            if run.info.status != "RUNNING":
                retry(client.update_run, run.info.run_id, status="RUNNING")
            if driver and run.data.tags.get(DRIVER_TAG) != "true":
                retry(client.set_tag, run.info.run_id, DRIVER_TAG, "true")
        return run.info.run_id


def job_parent(client: Any, uri: str, experiment_id: str, sweep: SweepContext,
               tags: Dict[str, str]) -> Tuple[str, bool]:
    """The parent run of a job and whether the job must close it (no driver does).

    A parent the driver holds open is looked up once per process; otherwise every job opens it again, since the
    last job of an earlier batch may have closed it."""
    cached = _parents.get((uri, sweep.key))
    if cached is not None:
        return cached, False
    run = find_parent(client, [experiment_id], sweep.key)
    if run is not None and run.data.tags.get(DRIVER_TAG) == "true":
        _parents[(uri, sweep.key)] = run.info.run_id
        return run.info.run_id, False
    return open_parent(client, experiment_id, sweep, tags), True


def close_parent(client: Any, experiment_id: str, parent_id: str, sweep: SweepContext,
                 orphans_to: Optional[str] = None, lost: Optional[str] = None) -> None:
    """Give the parent its children's outcome once none is RUNNING.

    ``orphans_to`` (e.g. KILLED), used once the whole sweep is over, first ends children still marked RUNNING:
    their processes are gone, so that status is stale. ``lost`` (the sweep lost its Ray cluster: what was lost)
    becomes the ``error`` tag of those children and of the parent, which is FAILED whatever its children say;
    a job that outlived the loss long enough to close the parent again leaves it so.
    """
    with file_lock(sweep.dir / LOCK_NAME):
        if orphans_to:
            for run in children(client, experiment_id, parent_id, "RUNNING", limit=50000):
                if lost:
                    retry(client.set_tag, run.info.run_id, "error", clip_tag(lost))
                retry(client.set_terminated, run.info.run_id, status=orphans_to)
        if lost:
            retry(client.set_tag, parent_id, "error", clip_tag(lost))
            retry(client.set_tag, parent_id, LOST_TAG, "true")
        elif children(client, experiment_id, parent_id, "RUNNING", limit=1):
            return
        status = "FINISHED"
        for bad in ("FAILED", "KILLED"):
            if children(client, experiment_id, parent_id, bad, limit=1):
                status = bad
                break
        if lost or LOST_TAG in retry(client.get_run, parent_id).data.tags:
            status = "FAILED"
        retry(client.set_terminated, parent_id, status=status)


def release_parent(client: Any, experiment_id: str, parent_id: str, sweep: SweepContext, orphans_to: str,
                   lost: Optional[str] = None) -> None:
    """The driver's end of a sweep: close the parent (ending children left RUNNING) and hand it back to jobs, so a
    later sweep into the same directory without the driver closes it itself."""
    close_parent(client, experiment_id, parent_id, sweep, orphans_to=orphans_to, lost=lost)
    retry(client.delete_tag, parent_id, DRIVER_TAG)


def children(client: Any, experiment_id: str, parent_id: str, status: Optional[str],
             limit: int = 1000) -> List[Any]:
    """Child runs of ``parent_id`` with ``status`` (None: any)."""
    where = f"tags.`{PARENT_TAG}` = '{parent_id}'" + (f" and attributes.status = '{status}'" if status else "")
    return retry(client.search_runs, [experiment_id], max_results=limit, filter_string=where)
