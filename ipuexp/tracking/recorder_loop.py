"""The recorder's own loop (:mod:`ipuexp.tracking.recorder`): in the forked process, the sweep's start, each job's
run as the driver sends it, the sweep's end."""
from __future__ import annotations

import functools
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Tuple

from ipuexp.tracking.record import JobRecord, Started

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from ipuexp.config.types import ConfigNode

log = logging.getLogger("ipuexp")


def serve_early(conn: "Connection") -> int:
    """A recorder forked as the command starts: import MLflow and its SQL store, open the store it is told, then
    wait for the start."""
    _ignore_signals()
    import mlflow  # noqa: F401  (most of the time a store takes to open)
    from mlflow.store.tracking import sqlalchemy_store  # noqa: F401

    from ipuexp.tracking.store import client

    try:
        kind, payload = conn.recv()
    except (EOFError, OSError):
        return 0
    if kind != "open":
        return 0
    try:
        client(payload)
    except Exception:  # said as the start fails, if it does
        pass
    try:
        kind, payload = conn.recv()
    except (EOFError, OSError):
        return 0
    return serve(conn, payload) if kind == "start" else 0


def _ignore_signals() -> None:
    """The driver decides when the recorder ends: an interrupt reaches both processes, and the driver's jobs record
    theirs as KILLED, then close the sweep."""
    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)


def _warm() -> None:
    """What writing a run needs besides the store, loaded while the jobs compute: MLflow's entities and artifact
    repositories, and the user, source, git and version tags (each found once per process)."""
    from mlflow.entities import Metric, Param, RunTag  # noqa: F401
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository  # noqa: F401

    from ipuexp.tracking.identity import git_commit, package_version
    from ipuexp.tracking.runs import _context_tags

    _context_tags()
    git_commit()
    package_version()


def _start(spec: Tuple[Any, ...]) -> Started:
    if spec[0] == "run":
        from ipuexp.tracking.store import client, experiment_id

        uri, name = spec[1], spec[2]
        return Started(uri=uri, experiment_id=experiment_id(client(uri), name, uri), parent_id=None)
    from hydra.core.utils import configure_log, setup_globals

    from ipuexp.tracking.sweep_runs import sweep_start

    _, config, ctx, driver, start_ms = spec
    # Hydra's resolvers (a recorder forked before Hydra started has none); the configuration carries the values the
    # driver resolved (its sweep folder's time), which they return.
    setup_globals()
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)  # what it says, as the driver says it
    return sweep_start(config, ctx, driver, start_ms, resumed=True)


def _end(spec: Tuple[Any, ...], how: str, started: Started) -> None:
    if spec[0] == "sweep":
        from ipuexp.tracking.sweep_runs import sweep_end

        _, config, ctx, _, _ = spec
        sweep_end(config, ctx, how, started)


def serve(conn: "Connection", spec: Tuple[Any, ...]) -> int:
    """The recorder: the sweep's start, each job's run, the sweep's end (``spec``: see ``_Start``)."""
    _ignore_signals()
    ok = True
    try:
        started: Optional[Started] = _start(spec)
    except Exception as exc:  # the store failed: the jobs' records cannot go anywhere; said once
        log.warning(f"ipuexp: MLflow recording of this sweep failed as it started: {exc}")
        started, ok = None, False
    try:
        conn.send(("resumed", sorted(started.resumed) if started is not None else []))
    except OSError:  # the driver is gone; what it sent before is still to be read
        pass
    if started is not None:
        _warm()
    recorded = False
    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):  # the driver is gone without a word
            kind, payload = "end", "gone"
        if kind == "end":
            if started is not None and payload in ("gone", "KILLED") and spec[0] == "run" and not recorded \
                    and len(spec) > 3:
                record_job(_killed(spec[3]), started)  # killed before its job sent its run: KILLED all the same
            if started is not None:
                try:
                    _end(spec, payload, started)
                except Exception as exc:
                    log.warning(f"ipuexp: closing the sweep's MLflow runs failed: {exc}")
                    ok = False
            return 0 if ok else 1
        recorded = True
        run_id, failed = record_job(payload, started) if started is not None else (None, "the store failed to open")
        ok = ok and failed is None
        if payload.reply:
            try:
                conn.send(("run", run_id, failed))
            except OSError:
                pass


def record_job(record: JobRecord, started: Started) -> Tuple[Optional[str], Optional[str]]:
    """Write one job's run (in the recorder): its id, and what the store said when it failed (then said in one
    line, for a sweep's job). A configuration that finished in the lost sweep this one resumes gets no second run."""
    from mlflow.entities import Metric, RunTag

    from ipuexp.tracking import curated
    from ipuexp.tracking.identity import clip_tag, job_tags
    from ipuexp.tracking.runs import PARENT_TAGS, TrackedRun, _artifact_repo, _context_tags
    from ipuexp.tracking.store import client, experiment_id, retry
    from ipuexp.tracking.sweep import PARENT_TAG, close_parent, job_parent, run_name, varied

    tags = job_tags(record.data)
    if tags["config_hash"] in started.resumed:
        return None, None
    try:
        c = client(record.uri)
        exp_id = experiment_id(c, record.experiment, record.uri)
        sweep, overrides = record.sweep, record.overrides
        tags["overrides"] = clip_tag(" ".join(overrides))
        parent_id, closes_parent = None, False
        if sweep is not None and (record.uri, exp_id) == (started.uri, started.experiment_id):
            parent_id = started.parent_id
        elif sweep is not None:
            parent_id, closes_parent = job_parent(c, record.uri, exp_id, sweep,
                                                  {k: tags[k] for k in PARENT_TAGS if k in tags})
        if parent_id is not None:
            tags[PARENT_TAG] = parent_id
        swept = sweep.swept_keys if sweep is not None else None
        name = record.name or run_name(overrides, swept, fallback=str(record.data.get("recipe") or ""))
        run = retry(c.create_run, exp_id, start_time=record.start_ms, run_name=name or None,
                    tags={**dict(_context_tags()), **tags})
        tracked = TrackedRun(c, run.info.run_id, functools.partial(_artifact_repo, record.uri, run.info.artifact_uri),
                             params=curated.params(record.data, [k for k, _ in varied(overrides, swept)], overrides),
                             in_sweep=sweep is not None)
        tracked._metrics = [Metric(*m) for m in record.metrics]
        tracked._tags = [RunTag(k, v) for k, v in record.tags]
        tracked._files = [(Path(p), a) for p, a in record.files]
        tracked.finish(record.status, dict(record.texts), end_time=record.end_ms)
        if closes_parent:
            close_parent(c, exp_id, parent_id, sweep)
        return run.info.run_id, None
    except Exception as exc:
        said = " ".join(str(exc).split())[:200] or type(exc).__name__
        if record.sweep is not None:
            kept = [p for p, _ in record.files if Path(p).name == "result.json"]
            log.warning(f"tracking.uri={record.uri!r}: the tracking store failed as the run of "
                        f"{' '.join(record.overrides)} was recorded ({said}); "
                        + (f"its result is kept in {kept[0]}" if kept else "it wrote no result"))
        return None, said


def _killed(record: JobRecord) -> JobRecord:
    """The run of a single job whose command was killed before the job sent it (``kill -9``)."""
    import time

    record.status, record.end_ms = "KILLED", int(time.time() * 1000)
    record.tags.append(("error", "its command was killed before the run ended"))
    return record


def _first_record(cfg: ConfigNode, uri: str, experiment: str) -> Tuple[JobRecord, ...]:
    """What the recorder writes as KILLED if the command dies before its job sends its run (none where the
    configuration does not resolve before Hydra starts): the configuration as composed, the command line's
    overrides. Node by node, without Hydra's own, which resolves only in a running job (and without a copy of the
    whole configuration: milliseconds on the way to the run)."""
    import sys
    import time

    from omegaconf import OmegaConf

    try:
        data = {k: OmegaConf.to_container(cfg[k], resolve=True, enum_to_str=True) if OmegaConf.is_config(cfg[k])
                else cfg[k] for k in cfg if k != "hydra"}
    except Exception:
        return ()
    return (JobRecord(uri=uri, experiment=experiment, data=data,
                      overrides=[a for a in sys.argv[1:] if not a.startswith("-")], sweep=None, name=None,
                      start_ms=int(time.time() * 1000)),)


def record_run(cfg: ConfigNode) -> None:
    """For a single tracked run of ``python -m ipuexp`` (its configuration composed, Hydra not started): start its
    recorder now, so that MLflow is imported and its store opened while the job is composed and evaluated. Not for
    a run that asks the store first (``tracking.skip_completed``) or trains (its metrics are sent as it goes)."""
    mode = cfg.engine.mode
    if not cfg.tracking.enabled or cfg.tracking.skip_completed or str(getattr(mode, "value", mode)) != "analytic":
        return
    from ipuexp.tracking import recorder
    from ipuexp.tracking.store import experiment_name, tracking_uri

    recorder.allow()
    uri = tracking_uri(cfg)
    recorder.open_early(uri)
    name = experiment_name(cfg)
    if recorder.defer(None, ("run", uri, name, *_first_record(cfg, uri, name)), lambda: None):
        recorder.start_aside(serve)
