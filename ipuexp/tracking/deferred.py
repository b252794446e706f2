"""A job's MLflow run written by its recorder (:mod:`ipuexp.tracking.recorder`): the job collects what
:class:`ipuexp.tracking.runs.TrackedRun` would log, without MLflow, and sends it as it ends; the recorder writes the
run as the job would have (``ipuexp.tracking.recorder_loop.record_job``)."""
from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, List, Mapping, Optional, Tuple

from omegaconf import OmegaConf

from ipuexp.result import Result
from ipuexp.tracking import safety
from ipuexp.tracking.record import JobRecord

if TYPE_CHECKING:
    from ipuexp.tracking.job import JobTracking

log = logging.getLogger("ipuexp")


def _now_ms() -> int:
    return int(time.time() * 1000)


class DeferredRun:
    """Stands in for a job's :class:`~ipuexp.tracking.runs.TrackedRun`; its run id is the recorder's to know."""

    def __init__(self, record: JobRecord, tile_memory_bytes: Optional[int]):
        self.record = record
        self._tile_memory_bytes = tile_memory_bytes
        self._id: Optional[str] = None
        self._asked: Any = None
        """The recorder that owes this run's id (a single run's), until it is read."""

    @property
    def run_id(self) -> Optional[str]:
        """The run's id once the recorder wrote it (a single run waits here, after its tables are printed); a
        store that failed is :class:`~ipuexp.tracking.run_entries.StoreFailed`, one line naming the result kept."""
        if self._asked is not None:
            from ipuexp.tracking.run_entries import StoreFailed

            rec, self._asked = self._asked, None
            self._id, failed = rec.wait_run()
            if failed is not None:
                raise StoreFailed(self.record.uri, RuntimeError(failed), self)
        return self._id

    def log_step_metrics(self, step: int, values: Mapping[str, float]) -> None:
        ts = _now_ms()
        self.record.metrics.extend((k, float(v), ts, int(step)) for k, v in values.items())

    def log_result(self, result: Result) -> None:
        from ipuexp.tracking.run_entries import result_entries

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
def deferred_job(job: JobTracking, rec: Any, name: Optional[str]) -> Iterator[DeferredRun]:
    """``track_job`` for a job whose sweep has a recorder: the same statuses (FINISHED, FAILED with the error and
    its traceback, KILLED on Ctrl-C, SIGTERM or SIGHUP), sent to the recorder however the block ends."""
    from ipuexp.tracking.run_entries import StoreFailed, error_entries, hydra_overrides

    data, sweep = job.data, job.sweep
    record = JobRecord(uri=job.uri, experiment=job.experiment, data=data,
                       overrides=list(sweep.job_overrides) if sweep is not None else hydra_overrides(),
                       sweep=sweep, name=name, start_ms=_now_ms(), reply=True)
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
            record.texts["config.yaml"] = OmegaConf.to_yaml(job.cfg, resolve=True)  # the job did not write its own
        rec.send(record)
        if sweep is None:
            run._asked = rec
            if error is not None:  # the job's own error says more; the store's goes on one line beside it
                try:
                    run.run_id
                except StoreFailed as store_failed:
                    log.warning(str(store_failed))
