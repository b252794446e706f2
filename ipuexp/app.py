"""One job: config -> graph capture -> engine -> result.json, charts, console table (a single run's), MLflow run."""
from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, Iterator, List

from omegaconf import DictConfig, OmegaConf

from ipuexp.config.schema import ExperimentConfig
from ipuexp.config.sweep_points import GRID_SWEEPERS
from ipuexp.files import write_whole
from ipuexp.result import Objective, Result, Skipped
from ipuexp.runner.evaluation import evaluate

if TYPE_CHECKING:
    from ipuexp.tracking.job import JobTracking

log = logging.getLogger("ipuexp")



def _instances_driver(exp: ExperimentConfig) -> ContextManager[object]:
    """Ray for PopRun-style instances (Ray actors): the runner connects, the functional engine uses it."""
    if int(exp.options.num_instances) <= 1:
        return contextlib.nullcontext()
    from ipuexp.runner.cluster import RaySettings, session

    r = exp.runner.ray
    return session(RaySettings(address=r.address, num_cpus=r.num_cpus, object_store_memory=r.object_store_memory,
                               log_to_driver=True))


def _wants_charts(exp: ExperimentConfig) -> bool:
    mode = exp.report.charts.value
    if mode != "auto":
        return mode == "always"
    return not _in_sweep()


def _in_sweep() -> bool:
    """A point of a Hydra multirun: the launcher reports it in one line and the sweep's table, not its own."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def _command_line() -> List[str]:
    """The job's command-line overrides (Hydra's task overrides), which win over an imported ipu_config.json."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def run_job(cfg: DictConfig, out_dir: str | Path = ".") -> Result | Skipped:
    """Validate, evaluate, write ``result.json`` and charts into ``out_dir``, track the run and, outside a sweep,
    print the result's tables.

    Returns ``Skipped`` when the configuration already has a FINISHED run in MLflow and need not run again
    (``ipuexp.tracking.job.JobTracking.skip``)."""
    with open_job(cfg, out_dir) as job:
        if isinstance(job, Skipped):
            return job
        exp, result = job.exp, job.result
        if exp.engine.mode.value == "functional":
            from ipuexp.training import run_functional
            from ipuexp.training.checkpoint import latest

            with _instances_driver(exp):
                result.functional = run_functional(exp, tracker=job.run, out_dir=job.out,
                                                   predicted_samples_per_s=result.throughput.samples_per_s)
            ckpt = latest(job.out)
            if ckpt is not None:
                result.artifacts["checkpoint"] = str(ckpt.resolve())
    return result


@dataclass
class OpenJob:
    """A job between its prediction and its end (``open_job``): the body may add ``result.functional`` and log
    per-step metrics to ``run``."""

    exp: ExperimentConfig
    result: Result
    run: Any
    out: Path


@contextlib.contextmanager
def open_job(cfg: DictConfig, out_dir: str | Path = ".", report_prediction: bool = False) -> Iterator[Any]:
    """One job around its functional part: validate, evaluate, charts, the MLflow run open for the ``with`` block
    (yields an :class:`OpenJob`, or ``Skipped`` as ``run_job`` returns it); on leaving, ``config.yaml`` and
    ``result.json`` are written, the result logged and, outside a sweep, the report printed.

    ``report_prediction`` writes and reports the prediction on entering instead (a PopTorch script prints it
    before it trains; ``result.json`` is rewritten on leaving)."""
    from ipuexp.config.compose import apply_calibration, apply_imported_options
    from ipuexp.config.validate import validate
    from ipuexp.tracking import JobTracking, track_job

    warnings = apply_imported_options(cfg, _command_line())
    apply_calibration(cfg)
    for warning in warnings + validate(cfg):
        log.warning(warning)
    tracking = JobTracking.of(cfg)  # identity, store, sweep and resume, asked once
    if tracking.skip:
        log.info("skipped: this configuration already has a FINISHED run in MLflow (tracking.skip_completed=true, "
                 "or a re-run of a sweep that lost its Ray cluster)")
        yield _skipped(tracking) if optimising() else Skipped()
        return
    exp = OmegaConf.to_object(cfg)
    if exp.data.dataset == "mnist" or exp.data.path is not None:
        from ipuexp.data.paths import resolve_path

        # Absolute before any worker starts: Ray actors run in other folders, without Hydra's launch directory.
        exp.data.path = str(resolve_path(exp.data.path))
    out = Path(out_dir)
    charts, failed = _wants_charts(exp), None
    from ipuexp.report.gc_freeze import collection_paused
    from ipuexp.report.run_charts import charts_aside, charts_in_worker

    try:  # before the run opens, so that the charts are drawn while it does; a failure fails the run (below)
        # Loading the graph and matplotlib allocates hundreds of thousands of objects, all kept: collections then
        # only walk them, on the way to the charts' fork.
        with collection_paused():
            # The warm worker draws the charts from an evaluation of its own, beside this one when the graph is
            # cached already (else once this evaluation has cached it); without one, a process forked below does.
            worker = charts_in_worker(exp, out) if charts else None
            ev = evaluate(exp)
            if charts and worker is None:
                worker = charts_in_worker(exp, out)
            if worker is not None:
                drawn = functools.partial(worker, ev)
            else:
                drawn = charts_aside(ev, out) if charts else None
    except Exception as err:
        failed = err
    finally:
        from ipuexp.runner import warm_worker

        warm_worker.drop()  # a worker no charts took
    with track_job(tracking) as run:
        if failed is not None:
            raise failed
        result = ev.result
        if drawn is not None:
            try:
                drawn()
            except OSError as err:  # a full disk: the charts are left out (none half-written), the result is kept
                log.warning("the charts were not written to %s (%s); the run goes on without them", out,
                            err.strerror or err)
        if report_prediction:
            _write_result(result, out, cfg, run)
            if not _in_sweep():
                _report(result, out, run, tracking.experiment)
        yield OpenJob(exp=exp, result=result, run=run, out=out)
        _write_result(result, out, cfg, run)
    if not _in_sweep() and not report_prediction:
        _report(result, out, run, tracking.experiment)


def _write_result(result: Result, out: Path, cfg: DictConfig, run: Any) -> None:
    """``config.yaml`` and ``result.json`` into ``out``, the result into the MLflow run."""
    write_whole(out / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    result.artifacts["config"] = str((out / "config.yaml").resolve())
    path = out / "result.json"
    result.artifacts["result"] = str(path.resolve())
    write_whole(path, json.dumps(result.to_dict(), indent=2))
    run.log_result(result)


RECORD_LOGGER = "ipuexp-record"
"""Writes to the job's log file only (``conf/config.yaml``: ``hydra.job_logging``): what a single run printed."""


def _report(result: Result, out: Path, run: Any, experiment: str) -> None:
    """The run's tables, where its files went and its MLflow run, on the terminal and in the job's log file."""
    import logging

    from ipuexp.report.console import print_result
    from ipuexp.terminal_table import terminal_console

    console = terminal_console(record=True)
    print_result(result, console)
    files = [p.name for p in sorted(out.iterdir(), key=lambda p: (p.suffix != ".json", p.name))
             if p.is_file() and not p.name.startswith(".") and p.suffix != ".log"]
    folder = os.path.relpath(out.resolve(), _launch_dir())
    console.print(f"Wrote {', '.join(files)} to {folder}{os.sep}", markup=False, highlight=False)
    if getattr(run, "run_id", None):
        console.print(f"MLflow run {run.run_id} in experiment {experiment!r} (see it with mlflow ui)",
                      markup=False, highlight=False)
    # the record's header stands on the report's first line: no empty record line opens the log
    logging.getLogger(RECORD_LOGGER).info(console.export_text().rstrip("\n"))


def _launch_dir() -> str:
    """Where the command was started (Hydra changes into the run folder)."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get().runtime.cwd if HydraConfig.initialized() else os.getcwd()


def optimising() -> bool:
    """True in a multirun whose sweeper optimises what each job returns (any ``hydra/sweeper`` but ``GRID_SWEEPERS``)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return False
    hc = HydraConfig.get()
    return hc.mode == RunMode.MULTIRUN and hc.runtime.choices.get("hydra/sweeper") not in GRID_SWEEPERS


def sweep_return(outcome: Result | Skipped) -> Result | Skipped | Objective:
    """What the task function returns to Hydra: ``outcome`` itself, or, for an optimisation sweeper, its objective.

    The objective is the predicted throughput (samples/s) as an :class:`Objective`, a float; a configuration that
    does not fit raises :class:`ipuexp.runner.errors.DoesNotFit` (one line), so Hydra's JobReturn is FAILED and the
    sweeper fails the trial (Optuna: ``TrialState.FAIL``). The run was recorded before, as any out-of-memory point:
    ``result.json`` written, MLflow run FINISHED with ``fits=false``."""
    if not optimising():
        return outcome
    from ipuexp.runner.errors import DoesNotFit

    if isinstance(outcome, Skipped):
        if outcome.fits is False:
            raise DoesNotFit("does not fit in IPU memory (its FINISHED run in MLflow says fits=false)")
        if outcome.samples_per_s is None:
            raise DoesNotFit("skipped: its FINISHED run in MLflow has no throughput_samples_per_s to report")
        return _kept(Objective(outcome.samples_per_s, outcome, outcome.metrics))
    if outcome.fits is False:
        report = outcome.memory.report if outcome.memory is not None else []
        raise DoesNotFit("does not fit in IPU memory" + (f": {report[0]}" if report else ""))
    from ipuexp.tracking.curated import metrics

    return _kept(Objective(outcome.throughput.samples_per_s, outcome, metrics(outcome)))


def _kept(objective: Objective) -> Objective:
    """``objective.json`` in the job's folder: what the job returns to the sweeper, kept where a study resumed after
    its driver was killed finds it (``ipuexp.sweeps.optuna_study``), so a finished job is not evaluated twice."""
    from ipuexp.sweeps.optuna_study import OBJECTIVE_FILE

    try:
        write_whole(OBJECTIVE_FILE, json.dumps({"value": float(objective), "metrics": objective.metrics}))
    except OSError:  # only a shortcut for a resumed study: the sweeper has the value either way
        Path(OBJECTIVE_FILE).unlink(missing_ok=True)
    return objective


def _skipped(tracking: JobTracking) -> Skipped:
    """Skipped with the figures of the configuration's FINISHED run, for an optimisation sweeper to read."""
    run = tracking.completed_run()
    metrics = run.data.metrics if run is not None else {}
    fits = metrics.get("fits")
    return Skipped(samples_per_s=metrics.get("throughput_samples_per_s"), fits=None if fits is None else fits > 0.5,
                   metrics=dict(metrics))
