"""Jobs as Ray tasks, in the sweep's driver process (``ipuexp.runner.driver``).

Each job is submitted after the capture its model needs (one capture per distinct model, run first as a task of
its own) and handed back, as the pickled JobReturn the worker made, when it ends. A job whose worker died fails
alone; Ray re-runs it first (``max_retries``), never a job that raised. Losing the node under this process is
not a job's failure: :class:`ClusterGone` stops the whole batch.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ipuexp.runner.errors import JobFailedError, describe, failed_return, job_error

log = logging.getLogger(__name__)


class ClusterGone(Exception):
    """The Ray cluster under this driver went away; ``str()`` says what is known of it."""


@dataclass
class Job:
    pos: int
    """Position in the batch."""
    overrides: List[str]
    config: bytes
    """The composed job configuration, pickled by the launcher and unpickled by the worker."""
    capture: Optional[Tuple[str, Any, int, Optional[str]]] = None
    """``ipuexp.runner.captures.request`` of the job: the graph capture it shares with others."""


class Dispatch:
    """One batch of jobs: submits them and hands them back as they finish."""

    def __init__(self, ray: Any, sweep_id: str, context: bytes, options: Any, preload: Sequence[str]):
        from ipuexp.runner import worker

        self.ray, self.sweep_id, self.options, self.preload = ray, sweep_id, options, list(preload)
        self.context = ray.put(context)
        common: Dict[str, Any] = dict(num_cpus=options.cpus_per_job, max_retries=options.max_retries,
                                      retry_exceptions=False)
        if options.runtime_env:  # per task, so it applies on a Ray started earlier too
            common["runtime_env"] = options.runtime_env
        # max_calls=0: a worker process serves any number of jobs, so its imports and captures are reused.
        self.execute = ray.remote(max_calls=0, **common)(worker.execute)
        self.warm = ray.remote(num_returns=2, max_calls=0, **common)(worker.warm_capture)
        self.preload_task = ray.remote(max_calls=0, **common)(worker.preload)
        self.running: Dict[Any, Job] = {}
        self.warming: Dict[Any, tuple] = {}  # error ref -> (key, graph ref, jobs waiting for it)
        self.graphs: Dict[str, Any] = {}  # capture key -> graph ref (None: capture failed, jobs capture themselves)
        self.background: List[Any] = []
        # Jobs that run at once: the cluster's CPUs over the CPUs each job takes.
        self.slots = max(1, int(ray.cluster_resources().get("CPU", 1) // max(options.cpus_per_job, 1e-9)))

    @property
    def pending(self) -> int:
        return len(self.running) + sum(len(w[2]) for w in self.warming.values())

    def add(self, job: Job) -> None:
        if job.capture is None or not self.options.share_captures:
            self._submit(job, None)
            return
        key, model, micro_batch_size, cache_dir = job.capture
        if key in self.graphs:
            self._submit(job, self.graphs[key])
            return
        for k, _, waiting in self.warming.values():
            if k == key:
                waiting.append(job)
                return
        err_ref, graph_ref = self.warm.remote(model, micro_batch_size, cache_dir)
        self.warming[err_ref] = (key, graph_ref, [job])
        if not self.background and self.preload:
            # While the capture runs, the other CPUs' workers import what the jobs need.
            others = min(self.slots - 1, 64)
            self.background = [self.preload_task.remote(self.preload) for _ in range(others)]

    def _submit(self, job: Job, graph_ref: Any) -> None:
        box = [graph_ref] if graph_ref is not None else None
        key = job.capture[0] if job.capture and self.options.share_captures else None
        ref = self.execute.remote(self.sweep_id, [self.context], job.config, key, box)
        self.running[ref] = job

    def collect(self, timeout_s: float) -> List[Tuple[Job, bytes]]:
        """Jobs that finished, each with its pickled JobReturn; waits up to ``timeout_s`` for the first."""
        from ray import cloudpickle

        ray = self.ray
        refs = list(self.running) + list(self.warming)
        if not refs:
            return []
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout_s)
        if ready:  # and whatever else has finished meanwhile
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        out: List[Tuple[Job, bytes]] = []
        for ref in ready:
            if ref in self.warming:
                self._warmed(ref)
                continue
            job = self.running.pop(ref)
            try:
                out.append((job, ray.get(ref)))
            except ray.exceptions.RayError as exc:
                error = ray_error(ray, exc, self.options.max_retries + 1)
                out.append((job, cloudpickle.dumps(failed_return(job.overrides, error))))
        return out

    def _warmed(self, ref: Any) -> None:
        key, graph_ref, jobs = self.warming.pop(ref)
        try:
            error = self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:  # the capture's worker died; each job tries on its own
            error = ray_error(self.ray, exc, self.options.max_retries + 1).message
        if error:
            log.warning(f"Shared capture failed ({error}); {len(jobs)} jobs capture the model themselves")
            graph_ref = None
        self.graphs[key] = graph_ref
        for job in jobs:
            self._submit(job, graph_ref)

    def cancel(self) -> None:
        for ref in list(self.running) + list(self.warming) + self.background:
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # already finished, or its worker is gone
                pass


def ray_error(ray: Any, exc: Exception, attempts: int) -> JobFailedError:
    """The one-line failure of a job whose task Ray could not finish; :class:`ClusterGone` when the cause is the
    node under this driver going away rather than the job."""
    if isinstance(exc, (ray.exceptions.LocalRayletDiedError, ray.exceptions.RaySystemError)):
        raise ClusterGone(_first_line(exc)) from exc
    if isinstance(exc, ray.exceptions.RayTaskError):  # raised outside the task function (run_job itself)
        cause = getattr(exc, "cause", None)
        msg = describe(cause) if cause is not None else _first_line(exc)
        return job_error(cause, msg, str(exc)) if cause is not None else JobFailedError(msg, "RayTaskError", str(exc))
    if isinstance(exc, ray.exceptions.OutOfMemoryError):
        return JobFailedError("killed by Ray's memory monitor: the host ran out of memory", "OutOfMemoryError",
                              str(exc))
    if isinstance(exc, ray.exceptions.TaskCancelledError):
        return JobFailedError("cancelled", "TaskCancelledError", str(exc))
    if isinstance(exc, ray.exceptions.WorkerCrashedError):
        return JobFailedError(f"its worker process died ({attempts} attempt{'s' if attempts > 1 else ''}; Ray's "
                              "python-core-worker logs say why)", type(exc).__name__, str(exc))
    if isinstance(exc, ray.exceptions.NodeDiedError):  # another node; Ray re-ran the job as for a dead worker
        return JobFailedError(f"the node running it died ({attempts} attempt{'s' if attempts > 1 else ''})",
                              type(exc).__name__, str(exc))
    first = " ".join(str(exc).split(" traceback:")[0].split())[:300]  # Ray appends the remote traceback
    return JobFailedError(f"{type(exc).__name__}: {first}", type(exc).__name__, str(exc))


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).splitlines()[0].split())[:300] if str(exc).strip() else type(exc).__name__
