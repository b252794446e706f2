"""One MLflow run per job: parameters, tags, metrics, artifacts and an honest final status.

A job that raises is FAILED (its error text in the ``error`` tag), one interrupted (Ctrl-C, SIGTERM) is KILLED,
an out-of-memory configuration is a FINISHED run tagged ``fits=false``. A job costs the store three writes: the run
is created with its tags, its parameters, metrics and remaining tags go in one ``log_batch`` as it ends (per-step
metrics of a long run also every ``FLUSH_EVERY_S``), then its status is set. Files are copied into the run's
artifact location once, at the end. Writes are retried on SQLite lock contention, so many jobs can share one
``mlflow.db``.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from omegaconf import OmegaConf

from ipuexp.result import Result
from ipuexp.tracking import curated, safety
from ipuexp.tracking.identity import clip_tag, job_tags
from ipuexp.tracking.run_entries import (StoreFailed, error_entries, hydra_overrides, is_store_error,  # noqa: F401
                                         result_entries)
from ipuexp.tracking.store import checkpoint, client, experiment_id, retry
from ipuexp.tracking.sweep import PARENT_TAG, close_parent, job_parent, run_name, varied

if TYPE_CHECKING:
    from ipuexp.tracking.job import JobTracking

log = logging.getLogger(__name__)

MAX_PARAMS_PER_BATCH = 100
"""MLflow's ``MAX_PARAMS_TAGS_PER_BATCH`` (mlflow/utils/validation.py): params, and tags, per request."""
MAX_ENTITIES_PER_BATCH = 1000
"""MLflow's ``MAX_METRICS_PER_BATCH`` and ``MAX_ENTITIES_PER_BATCH``: metrics + params + tags in one request."""
FLUSH_EVERY_S = 10.0
"""Per-step metrics are sent at most this often (one transaction each), so the UI follows a long run."""
PARENT_TAGS = ("recipe", "ipuexp_version", "git_commit", "mlflow.source.git.commit")
"""Job tags a sweep's parent run shares (the rest may differ between its jobs)."""


class NoRun:
    """Stands in for a run when tracking is disabled."""

    run_id: Optional[str] = None

    def log_result(self, result: Result) -> None:
        pass

    def log_step_metrics(self, step: int, values: Mapping[str, float]) -> None:
        pass

    def log_artifact(self, path: str, artifact_path: Optional[str] = None) -> None:
        pass


class TrackedRun:
    """The MLflow run of one job; what it logs is buffered until :meth:`flush` or :meth:`end`."""

    def __init__(self, mlflow_client: Any, run_id: str, artifact_repo: Callable[[], Any],
                 params: Optional[Mapping[str, str]] = None, config_yaml: Optional[Callable[[], str]] = None,
                 tile_memory_bytes: Optional[int] = None, in_sweep: bool = False):
        from mlflow.entities import Param

        self.client = mlflow_client
        self.run_id = run_id
        self._repo = artifact_repo
        self._params = [Param(k, v) for k, v in (params or {}).items()]
        self._metrics: List[Any] = []
        self._tags: List[Any] = []
        self._files: List[Tuple[Path, Optional[str]]] = []
        self._config_yaml = config_yaml
        self._tile_memory_bytes = tile_memory_bytes
        self._in_sweep = in_sweep
        """A point of a sweep: the store is checkpointed once, as the sweep ends, not as each of its runs does."""
        self._last_flush = time.monotonic()

    def log_step_metrics(self, step: int, values: Mapping[str, float]) -> None:
        """Metrics of one training step (e.g. loss, accuracy); sent every ``FLUSH_EVERY_S`` and at the end."""
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        self._metrics.extend(Metric(k, float(v), ts, int(step)) for k, v in values.items())
        if len(self._metrics) >= MAX_ENTITIES_PER_BATCH or time.monotonic() - self._last_flush >= FLUSH_EVERY_S:
            self.flush()

    def log_result(self, result: Result) -> None:
        """The result's headline figures (:mod:`ipuexp.tracking.curated`), the ``fits`` tag, and the config,
        result, chart and trace files among ``result.artifacts`` (model checkpoints stay in the job's folder)."""
        from mlflow.entities import Metric, RunTag

        ts = int(time.time() * 1000)
        figures, tags, files = result_entries(result, self._tile_memory_bytes)
        self._metrics.extend(Metric(k, v, ts, 0) for k, v in figures.items())
        self._tags.extend(RunTag(k, v) for k, v in tags)
        for path in files:
            self.log_artifact(path)

    def log_artifact(self, path: str, artifact_path: Optional[str] = None) -> None:
        """A file, or a folder's contents under ``artifact_path``; copied when the run ends."""
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"artifact {path} does not exist")
        self._files.append((p, artifact_path))

    def flush(self) -> None:
        """Send what is buffered in as few requests as MLflow's limits allow (one, for a job's own figures)."""
        params, metrics, tags = self._params, self._metrics, self._tags
        self._params, self._metrics, self._tags = [], [], []
        while params or metrics or tags:
            p, params = params[:MAX_PARAMS_PER_BATCH], params[MAX_PARAMS_PER_BATCH:]
            t, tags = tags[:MAX_PARAMS_PER_BATCH], tags[MAX_PARAMS_PER_BATCH:]
            room = MAX_ENTITIES_PER_BATCH - len(p) - len(t)
            m, metrics = metrics[:room], metrics[room:]
            retry(self.client.log_batch, self.run_id, metrics=m, params=p, tags=t)
        self._last_flush = time.monotonic()

    def end(self, status: str, error: Optional[BaseException] = None) -> None:
        """Send what is buffered (with the error, if any), copy the files, and set the final status."""
        from mlflow.entities import RunTag

        texts: Dict[str, str] = {}
        if error is not None:
            tag, text = error_entries(status, error)
            self._tags.append(RunTag("error", tag))
            if text is not None:
                texts["error.txt"] = text
        self.finish(status, texts)

    def finish(self, status: str, texts: Dict[str, str], end_time: Optional[int] = None) -> None:
        """Send what is buffered, write ``texts`` (name -> content) and the files into the run, and set its status
        (at ``end_time``, ms since the epoch; default now)."""
        try:
            self.flush()
            if self._config_yaml and not any(p.name == "config.yaml" and a is None for p, a in self._files):
                texts["config.yaml"] = self._config_yaml()  # the job did not write its own
            self._copy_files(texts)
        finally:
            retry(self.client.set_terminated, self.run_id, status=status, end_time=end_time)
            if not self._in_sweep:
                checkpoint(str(getattr(self.client, "tracking_uri", "") or ""))

    def _copy_files(self, texts: Mapping[str, str]) -> None:
        repo = self._repo()
        with tempfile.TemporaryDirectory(prefix="ipuexp-run-") as tmp:
            for name, text in texts.items():
                (Path(tmp) / name).write_text(text)
            if texts:
                repo.log_artifacts(tmp)
        for path, artifact_path in self._files:
            if path.is_dir():
                repo.log_artifacts(str(path), artifact_path)
            else:
                repo.log_artifact(str(path), artifact_path)


@functools.lru_cache(maxsize=None)
def _context_tags() -> Tuple[Tuple[str, str], ...]:
    """MLflow's tags for runs of this process (user, source, git); resolved once, they do not change."""
    from mlflow.tracking.context.registry import resolve_tags

    return tuple(resolve_tags().items())


def _artifact_repo(uri: str, artifact_uri: str) -> Any:
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
    from mlflow.utils.uri import add_databricks_profile_info_to_artifact_uri

    return get_artifact_repository(add_databricks_profile_info_to_artifact_uri(artifact_uri, uri), tracking_uri=uri)


@contextlib.contextmanager
def track_job(job: JobTracking, name: Optional[str] = None) -> Iterator[Any]:
    """Open the MLflow run of ``job`` (a child of its sweep's parent run inside a multirun) for the ``with`` block.

    ``name`` defaults to the job's swept overrides. The run ends FINISHED when the block completes, FAILED when it
    raises, KILLED on Ctrl-C, SIGTERM or SIGHUP.
    """
    if not job.enabled:
        yield NoRun()
        return
    from ipuexp.tracking import recorder

    sweep, uri = job.sweep, job.uri
    rec = recorder.for_sweep(sweep.dir if sweep is not None else None)
    if rec is not None:  # the sweep's recorder writes the run (ipuexp.tracking.recorder)
        from ipuexp.tracking.deferred import deferred_job

        with deferred_job(job, rec, name) as run:
            yield run
        return
    try:
        c, exp_id, run, parent_id, closes_parent, overrides, swept = _open_run(job, name)
    except Exception as exc:
        if not is_store_error(exc):
            raise
        raise StoreFailed(uri, exc, None) from None
    data = job.data
    tracked = TrackedRun(c, run.info.run_id, functools.partial(_artifact_repo, uri, run.info.artifact_uri),
                         params=curated.params(data, [k for k, _ in varied(overrides, swept)], overrides),
                         config_yaml=lambda: OmegaConf.to_yaml(job.cfg, resolve=True),
                         tile_memory_bytes=data["ipu"].get("memory_per_tile_bytes"), in_sweep=sweep is not None)

    ended = []

    def close(status: str, error: Optional[BaseException] = None) -> None:
        if ended:  # the atexit net came first; the block's own exit (at interpreter shutdown) changes nothing
            return
        ended.append(status)
        try:
            tracked.end(status, error)
        finally:
            safety.unregister(tracked.run_id)
            if closes_parent:
                close_parent(c, exp_id, parent_id, sweep)

    safety.register(tracked.run_id, close)
    try:
        with safety.signals_as_exit():
            yield tracked
    except BaseException as exc:
        try:
            close("KILLED" if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)) else "FAILED", exc)
        except Exception as store_error:  # the job's own error says more; the store's goes on one line beside it
            log.warning(str(StoreFailed(uri, store_error, tracked)))
        raise
    try:
        close("FINISHED")
    except Exception as store_error:
        if not is_store_error(store_error):
            raise
        raise StoreFailed(uri, store_error, tracked) from None


def _open_run(job: JobTracking, name: Optional[str]) -> Tuple[Any, ...]:
    """The store's client, the experiment, the job's new run (under its sweep's parent run, if any) and what the
    run was made from."""
    uri, sweep = job.uri, job.sweep
    c = client(uri)
    exp_id = experiment_id(c, job.experiment, uri)
    tags = job_tags(job.data, job.config_hash)
    overrides = sweep.job_overrides if sweep else hydra_overrides()
    tags["overrides"] = clip_tag(" ".join(overrides))
    parent_id, closes_parent = None, False
    if sweep is not None:
        parent_id, closes_parent = job_parent(c, uri, exp_id, sweep, {k: tags[k] for k in PARENT_TAGS if k in tags})
        tags[PARENT_TAG] = parent_id
    swept = sweep.swept_keys if sweep else None
    name = name or run_name(overrides, swept, fallback=str(job.data.get("recipe") or ""))
    run = retry(c.create_run, exp_id, run_name=name or None, tags={**dict(_context_tags()), **tags})
    return c, exp_id, run, parent_id, closes_parent, overrides, swept


