"""A job's MLflow run written by the sweep's recorder (:mod:`ipuexp.tracking.recorder`): the job collects what
:class:`ipuexp.tracking.runs.TrackedRun` would log, without MLflow, and sends it as it ends; the recorder writes the
run as the job would have (``record_job``)."""
from __future__ import annotations

import contextlib
import functools
import logging
import time
from pathlib import Path
from typing import Any, Iterator, List, Mapping, Optional, Tuple

from omegaconf import DictConfig, OmegaConf

from ipuexp.result import Result
from ipuexp.tracking import safety
from ipuexp.tracking.recorder import JobRecord, Recorder, Started

log = logging.getLogger("ipuexp")


def _now_ms() -> int:
    return int(time.time() * 1000)


class DeferredRun:
    """Stands in for a job's :class:`~ipuexp.tracking.runs.TrackedRun`; its run id is the recorder's to know."""

    run_id: Optional[str] = None

    def __init__(self, record: JobRecord, tile_memory_bytes: Optional[int]):
        self.record = record
        self._tile_memory_bytes = tile_memory_bytes

    def log_step_metrics(self, step: int, values: Mapping[str, float]) -> None:
        ts = _now_ms()
        self.record.metrics.extend((k, float(v), ts, int(step)) for k, v in values.items())

    def log_result(self, result: Result) -> None:
        from ipuexp.tracking.runs import result_entries

        ts = _now_ms()
        figures, tags, files = result_entries(result, self._tile_memory_bytes)
        self.record.metrics.extend((k, v, ts, 0) for k, v in figures.items())
        self.record.tags.extend(tags)
        for path in files:
            self.log_artifact(path)

    def log_artifact(self, path: str, artifact_path: Optional[str] = None) -> None:
        if not Path(path).exists():
            raise FileNotFoundError(f"artifact {path} does not exist")
        self.record.files.append((str(path), artifact_path))

    @property
    def _files(self) -> List[Tuple[Path, Optional[str]]]:
        """The files as ``TrackedRun`` holds them (``StoreFailed`` names the result kept)."""
        return [(Path(p), a) for p, a in self.record.files]


@contextlib.contextmanager
def deferred_job(cfg: DictConfig, rec: Recorder, sweep: Any, name: Optional[str]) -> Iterator[DeferredRun]:
    """``track_job`` for a job whose sweep has a recorder: the same statuses (FINISHED, FAILED with the error and
    its traceback, KILLED on Ctrl-C, SIGTERM or SIGHUP), sent to the recorder however the block ends."""
    from ipuexp.tracking.identity import resolved
    from ipuexp.tracking.runs import StoreFailed, _hydra_overrides, error_entries
    from ipuexp.tracking.store import experiment_name, tracking_uri

    data = resolved(cfg)
    record = JobRecord(uri=tracking_uri(cfg), experiment=experiment_name(cfg), data=data,
                       overrides=list(sweep.job_overrides) if sweep is not None else _hydra_overrides(),
                       sweep=sweep, name=name, start_ms=_now_ms(), reply=sweep is None)
    run = DeferredRun(record, data["ipu"].get("memory_per_tile_bytes"))
    status, error = "FINISHED", None
    try:
        with safety.signals_as_exit():
            yield run
    except BaseException as exc:
        status = "KILLED" if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)) else "FAILED"
        error = exc
        raise
    finally:
        record.status, record.end_ms = status, _now_ms()
        if error is not None:
            tag, text = error_entries(status, error)
            record.tags.append(("error", tag))
            if text is not None:
                record.texts["error.txt"] = text
        if not any(Path(p).name == "config.yaml" and a is None for p, a in record.files):
            record.texts["config.yaml"] = OmegaConf.to_yaml(cfg, resolve=True)  # the job did not write its own
        rec.send(record)
        if record.reply:
            run.run_id, failed = rec.wait_run()
            if failed is not None:
                store_failed = StoreFailed(record.uri, RuntimeError(failed), run)
                if error is None:
                    raise store_failed
                log.warning(str(store_failed))  # the job's own error says more


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
                             params=curated.params(record.data, [k for k, _ in varied(overrides, swept)], overrides))
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
