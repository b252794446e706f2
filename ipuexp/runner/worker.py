"""What runs inside a Ray worker: one Hydra job, exactly as Hydra's basic launcher runs it.

Ray reuses a task's worker process for the next task (``max_calls=0``), so anything a job imports or captures stays
for the next job on that worker. The sweep's shared context (Hydra context, task function, Hydra's singletons) is
sent once through the object store and applied once per worker; each task carries only its own configuration.
"""
from __future__ import annotations

import functools
import importlib
import logging
import os
import pickle
import time
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple

from hydra.core.utils import JobReturn

from ipuexp.models.spec import ModelNode
from ipuexp.runner import captures
from ipuexp.runner.errors import DoesNotFit, JobFailedError, SweepReturn, describe, is_config_error, job_error

if TYPE_CHECKING:
    from ipuexp.config.types import ConfigNode

log = logging.getLogger(__name__)


@dataclass
class SweepContext:
    """What every job of one ``launch()`` call shares."""

    hydra_context: Any
    """Hydra's HydraContext (config loader, callbacks)."""
    task_function: Any
    """The ``@hydra.main`` function."""
    singleton_state: Any
    """``Singleton.get_state()`` of the driver: ConfigStore, HydraConfig, JobRuntime and custom resolvers."""
    preload: List[str] = field(default_factory=list)
    """Modules imported once per worker before its first job."""


_applied: Optional[str] = None
_context: Optional[SweepContext] = None
_imported: set = set()


def preload(modules: Sequence[str]) -> None:
    """Import ``modules`` once per process; a module that fails to import is left to the job to report."""
    for name in modules:
        if name in _imported:
            continue
        _imported.add(name)
        try:
            importlib.import_module(name)
        except Exception as exc:
            log.debug("preload of %s failed: %s", name, exc)


def _sweep_context(sweep_id: str, box: List[Any]) -> SweepContext:
    import ray
    from hydra.core.singleton import Singleton

    global _applied, _context
    if _applied != sweep_id:
        ctx = pickle.loads(ray.get(box[0]))  # pickled by the launcher: the driver process never unpickles it
        Singleton.set_state(ctx.singleton_state)  # also rediscovers Hydra's plugins: once per worker and sweep
        preload(ctx.preload)
        _applied, _context = sweep_id, ctx
    assert _context is not None
    return _context


def execute(sweep_id: str, context_box: List[Any], sweep_config: bytes, capture_key: Optional[str] = None,
            graph_box: Optional[List[Any]] = None) -> bytes:
    """Run one job (its configuration pickled) with ``hydra.core.utils.run_job``; return its JobReturn, pickled
    (a failure as JobFailedError): the sweep's driver process passes both on to the launcher as they are."""
    from hydra.core.utils import JobStatus, run_job, setup_globals
    from omegaconf import OmegaConf
    from ray import cloudpickle

    start = time.perf_counter()
    ctx = _sweep_context(sweep_id, context_box)
    config = pickle.loads(sweep_config)
    if capture_key and graph_box and not captures.cached(capture_key):
        import ray

        captures.seed(capture_key, ray.get(graph_box[0]))
    setup_globals()  # run_job sets HydraConfig itself
    home = os.getcwd()
    # Relative paths (a relative hydra.sweep.dir, to_absolute_path) mean the directory the sweep was started from,
    # as with the basic launcher; a worker on another machine that lacks it stays where it is.
    launch_dir = OmegaConf.select(config, "hydra.runtime.cwd", default=None)
    if launch_dir and os.path.isdir(launch_dir):
        os.chdir(launch_dir)
    timer = TaskTimer(ctx.hydra_context)
    try:
        ret = run_job(hydra_context=timer.hydra_context, task_function=ctx.task_function, config=config,
                      job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
        if ret.status == JobStatus.FAILED:
            ret.return_value = failure(ret._return_value)
    finally:
        os.chdir(home)
    packed = PackedJobReturn.pack(ret)
    packed.timing = JobTiming(worker_s=time.perf_counter() - start, task_s=timer.seconds)
    return cloudpickle.dumps(packed)


@dataclass
class JobTiming:
    """Where a job's time went in its worker."""

    worker_s: float
    """From the task's start in the worker to its JobReturn (Ray's transport of arguments and result excluded)."""
    task_s: float
    """In the task function itself; the rest is Hydra's run_job around it (job folder, .hydra files, logging)."""


class TaskTimer:
    """Times the task function from around it: Hydra's callbacks of the job, whose ``on_job_start`` (after the
    user's own) starts the clock and ``on_job_end`` (before them) stops it. ``run_job`` calls the task right between
    the two, and callbacks receive the task function itself, as under Hydra's basic launcher."""

    def __init__(self, hydra_context: Any):
        from hydra.types import HydraContext

        self.callbacks, self.seconds, self._start = hydra_context.callbacks, 0.0, 0.0
        self.hydra_context = HydraContext(config_loader=hydra_context.config_loader, callbacks=self)

    def on_job_start(self, **kwargs: Any) -> None:
        self.callbacks.on_job_start(**kwargs)
        self._start = time.perf_counter()

    def on_job_end(self, **kwargs: Any) -> None:
        self.seconds = time.perf_counter() - self._start
        self.callbacks.on_job_end(**kwargs)

    def __getattr__(self, name: str) -> Any:  # the run's and multirun's hooks, as they are
        return getattr(self.callbacks, name)


class PackedJobReturn(SweepReturn):
    """A JobReturn whose two configurations stay pickled until they are read.

    The driver of a sweep reads a job's status and return value; its ``cfg`` and ``hydra_cfg`` (hundreds of
    OmegaConf nodes each, the slowest part of a JobReturn to unpickle) are unpickled only if someone asks for them,
    which keeps the driver's CPU for the jobs on a small machine.
    """

    @classmethod
    def pack(cls, ret: JobReturn) -> "PackedJobReturn":
        # cloudpickle, as Ray itself: a structured config's dataclass may exist only in the ConfigStore (Hydra
        # runs plugin modules outside sys.modules), so it travels by value.
        from ray import cloudpickle

        packed = cls.__new__(cls)
        packed.__dict__.update({k: v for k, v in ret.__dict__.items() if k not in ("cfg", "hydra_cfg")})
        packed.__dict__["_packed"] = {k: cloudpickle.dumps(ret.__dict__.get(k)) for k in ("cfg", "hydra_cfg")}
        return packed

    def _field(self, name: str) -> Any:
        packed = self.__dict__.get("_packed", {})
        if name in packed:
            self.__dict__[name] = pickle.loads(packed.pop(name))
        return self.__dict__.get(name)

    @property  # type: ignore[override]
    def cfg(self) -> Any:
        return self._field("cfg")

    @cfg.setter
    def cfg(self, value: Any) -> None:
        self.__dict__.get("_packed", {}).pop("cfg", None)
        self.__dict__["cfg"] = value

    @property  # type: ignore[override]
    def hydra_cfg(self) -> Any:
        return self._field("hydra_cfg")

    @hydra_cfg.setter
    def hydra_cfg(self, value: Any) -> None:
        self.__dict__.get("_packed", {}).pop("hydra_cfg", None)
        self.__dict__["hydra_cfg"] = value


def failure(exc: BaseException, console: bool = True) -> JobFailedError:
    """The portable form of a job's exception; the traceback also goes to the job's log file, and to the console
    with ``console`` (a Ray worker's console is the sweep's ``ray-driver.log``; a job run in the sweep's own process
    leaves the console to the sweep's one line per point)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    handler = _job_log_handler()
    one_line = is_config_error(exc) or isinstance(exc, DoesNotFit)  # nothing to trace
    msg, args = ("%s", (exc,)) if one_line else ("job failed:\n%s", (text,))
    if console:
        log.error(msg, *args)
    elif handler is not None:
        handler.handle(log.makeRecord(log.name, logging.ERROR, __file__, 0, msg, args, None))
    log_file = handler.baseFilename if handler is not None else None
    return job_error(exc, describe(exc), text, log_file, is_config_error(exc))


def _job_log_handler() -> Optional[logging.FileHandler]:
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            return handler
    return None


def warm_capture(model: ModelNode, micro_batch_size: int, cache_dir: Optional[str]) -> Tuple[Optional[str], Any]:
    """Capture (or load from the disk cache) one model for the sweep: ``(error or None, graph or None)``.

    Nothing else is imported first: the jobs that need this graph wait for it. An error is not raised: those jobs
    then capture the model themselves and each reports its own failure with its own configuration.
    """
    try:
        return None, captures.capture(model, micro_batch_size, cache_dir)
    except Exception as exc:
        return describe(exc), None
