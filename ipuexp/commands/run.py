"""``python -m ipuexp``: compose the Hydra config, check it, run the job, track it.

Configuration errors (unknown keys, wrong types, cross-field rules) are caught before Hydra starts the job and
reported as one line naming the key, the value and what is allowed, with exit code 2.
"""
from __future__ import annotations

import copy
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional

if TYPE_CHECKING:
    from ipuexp.config.types import ConfigNode

from ipuexp.config.sweep_points import search_space_points, sweep_points  # noqa: F401 (the command's own)
from ipuexp.exit_status import EXIT_DOES_NOT_FIT, EXIT_INTERRUPTED, fail  # noqa: F401 (the poptorch command's too)
from ipuexp.exit_status import EXIT_BAD_INPUT as EXIT_CONFIG_ERROR


def _is_multirun(argv: List[str]) -> bool:
    return any(a in ("-m", "--multirun") for a in argv)


def _wants_hydra_only(argv: List[str]) -> bool:
    """Hydra's own informational flags (--help, --cfg, --info, ...) need no pre-flight check."""
    return any(a.startswith(("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "--shell-completion", "-sc"))
               for a in argv)


def preflight(overrides: List[str], rules: bool = True) -> Any:
    """Compose one configuration (``hydra.*`` overrides included) and, with ``rules``, validate it; raise
    ConfigError on the first problem. Returns the composed configuration, ``hydra`` node included."""
    from omegaconf import open_dict

    from ipuexp.config.compose import compose_config
    from ipuexp.config.errors import ConfigError
    from ipuexp.config.validate import validate

    cfg = compose_config(overrides, return_hydra_config=True)
    if cfg.hydra.runtime.choices.get("model") == "hf" and cfg.model.name != "hf":
        # +recipe=NAME is merged after the model group, so its model.name wins over model=hf's
        raise ConfigError("model.name", cfg.model.name, "allowed: hf with model=hf; a recipe sets model.name "
                          "after the model group: add model.name=hf to use the Transformers model with it")
    if rules:
        checked = copy.deepcopy(cfg)
        with open_dict(checked):
            del checked["hydra"]  # checked by composing; the experiment schema does not define it
        validate(checked)
    return cfg


def check_outputs(cfg: ConfigNode, multirun: bool) -> None:
    """Where the run writes, checked before it starts (seconds, not after the work): the run or sweep folder can
    be written, and the tracking store opens within ``tracking.timeout_s``."""
    from ipuexp.config.checks import check_writable

    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    node = cfg.hydra.sweep if multirun else cfg.hydra.run
    try:
        folder = str(node.dir)
    except Exception:  # an interpolation only a running job resolves: the fixed part before it
        folder = str(node._get_node("dir")._value()).split("${", 1)[0] or "."
    check_writable(key, folder)
    if cfg.tracking.enabled:
        from ipuexp.config.checks import check_uri_or_env
        from ipuexp.tracking.probe import check_store
        from ipuexp.tracking.store import absolute_uri, tracking_uri

        check_uri_or_env("tracking.uri", cfg.tracking.uri)
        uri = absolute_uri(tracking_uri(None) if cfg.tracking.uri is None else str(cfg.tracking.uri), Path.cwd())
        check_store("tracking.uri", cfg.tracking.uri or uri, uri, float(cfg.tracking.timeout_s))


def _tracking_off(argv: List[str]) -> bool:
    """The command line turns tracking off (no recorder is forked for it)."""
    return any(a.split("=", 1)[0].lstrip("+~") == "tracking.enabled" and a.split("=", 1)[-1].strip().lower()
               in ("false", "no", "off", "0") for a in argv)


def _record_aside(cfg: ConfigNode, overrides: List[str]) -> None:
    """A tracked grid sweep that will run in this process leaves its MLflow work to the recorder forked as the
    command started (:mod:`ipuexp.tracking.recorder`), which opens the store while Hydra composes the sweep."""
    import math

    from ipuexp.config.sweep_points import axes
    from ipuexp.tracking import recorder
    from ipuexp.tracking.hydra_callback import records_aside

    recorder.allow()
    if records_aside(cfg, math.prod(len(axis) for axis in axes(overrides))):
        from ipuexp.tracking.store import tracking_uri

        recorder.open_early(tracking_uri(cfg))


def check_optimiser(cfg: ConfigNode, overrides: List[str]) -> None:
    """What ipuexp's Optuna sweeper would refuse once started, checked before it starts: its settings, objectives
    and their directions, its search space (under the grid sampler one it can list) and its sampler's settings."""
    sweeper = cfg.hydra.sweeper
    if not str(sweeper.get("_target_", "")).endswith("OptunaSweeper"):
        return
    from hydra.utils import instantiate

    from ipuexp.sweeps.optuna_checks import check_sampler, check_settings
    from ipuexp.sweeps.optuna_space import directions, grid, objectives_of, space

    check_settings(sweeper)
    directions(objectives_of(sweeper.objectives, own=True), sweeper.direction)
    params = [f"{k}={v}" for k, v in (sweeper.params or {}).items()]
    trial_space = space(params + [o for o in overrides if not o.startswith("hydra")])
    is_grid = str(sweeper.sampler.get("_target_", "")).endswith("GridSampler")
    check_sampler(instantiate(sweeper.sampler), grid(trial_space.distributions) if is_grid else None)


def main(argv: Optional[List[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("--help", "-h") for a in argv):
        from ipuexp.commands.help import text

        print(text())
        return
    from ipuexp.config.errors import ConfigError
    mode, recorder = _UNKNOWN, None
    if not _wants_hydra_only(argv) and not _tracking_off(argv):
        from ipuexp.tracking import recorder
        from ipuexp.tracking.recorder_loop import serve_early

        recorder.start_early(serve_early)  # MLflow loads on the other core while the command line is checked
    elif not _wants_hydra_only(argv) and not _is_multirun(argv):
        # A single run's charts in a worker that loads matplotlib and the engine on the other core meanwhile.
        # (A tracked run leaves that core to MLflow's imports: its recorder is the longer wait.)
        from ipuexp.runner import warm_worker

        warm_worker.start("ipuexp.report.run_charts:load_for_charts")
    if not _wants_hydra_only(argv):
        overrides = [a for a in argv if not a.startswith("-")]
        try:
            # The first point is composed and validated; every other swept value is composed once, so a value the
            # schema rejects stops the sweep here. A rule broken by one combination fails that job alone.
            first, *others = sweep_points(overrides) if _is_multirun(argv) else [overrides]
            cfg = preflight(first)
            mode = cfg.hydra.get("mode")
            check_outputs(cfg, _is_multirun(argv))
            mode_ = getattr(cfg.engine.mode, "value", cfg.engine.mode)
            if not _is_multirun(argv) and mode_ == "functional" and cfg.options.num_instances > 1:
                from ipuexp.runner.ray_probe import check_ray

                check_ray(cfg)  # the run's instances are Ray actors
            if _is_multirun(argv):
                from ipuexp.runner.placement import check_launcher

                from ipuexp.runner.ray_probe import check_ray

                check_optimiser(cfg, overrides)
                check_launcher(cfg.hydra.launcher)
                check_ray(cfg)
                others += search_space_points(cfg, first, overrides)
            from ipuexp.config.swept_values import check_points

            check_points(cfg, first, others, lambda point: preflight(point, rules=False))
        except ConfigError as err:
            sys.exit(fail("ipuexp", f"config error: {err}", EXIT_CONFIG_ERROR))
        if cfg.tracking.enabled and not _is_multirun(argv):
            from ipuexp.tracking.recorder_loop import record_run

            record_run(cfg)  # its store opened while Hydra composes the job
        elif cfg.tracking.enabled:
            _record_aside(cfg, overrides)
    optimiser = _is_multirun(argv) and any(a.startswith("hydra/sweeper=") and a.split("=", 1)[1] not in
                                            ("ipuexp", "basic") for a in argv)
    multirun = _is_multirun(argv)
    if recorder is not None:
        recorder.drop_early()  # when no run or sweep here has taken it
    if multirun:
        # Hydra prints what a sweep raises, then a HYDRA_FULL_ERROR hint; let it through to be told apart (below).
        os.environ.setdefault("HYDRA_FULL_ERROR", "1")
    try:
        _hydra_entry(argv, mode)
    except KeyboardInterrupt:
        sys.exit(fail("ipuexp", "interrupted", EXIT_INTERRUPTED))
    except ConfigError as err:  # a setting only the sweeper can check (a stored study's search space)
        if not multirun:
            raise
        if _job_failed(err):  # a job's own ConfigError, as its JobFailedError: told like any failed job (below)
            _failed_sweep(err, optimiser)
        if not optimiser:
            print(str(err), file=sys.stderr)
            sys.exit(1)
        sys.exit(fail("ipuexp", f"config error: {err}", EXIT_CONFIG_ERROR))
    except Exception as err:
        from hydra.errors import CompactHydraException

        if not multirun or not isinstance(err, CompactHydraException):
            raise
        _failed_sweep(err, optimiser)


def _job_failed(err: BaseException) -> bool:
    from ipuexp.runner.errors import JobFailedError

    return isinstance(err, JobFailedError)


def _failed_sweep(err: BaseException, optimiser: bool) -> None:
    """A grid sweep's failed point: the sweep's summary has listed it with its log file; exit 1 without the error
    again. A study without a completed trial, or a failed trial it stops on (hydra.sweeper.max_failure_rate): its
    one line, as Hydra prints it."""
    from ipuexp.sweeps.optuna_results import NoTrialCompleted

    if not (_job_failed(err) and not optimiser):
        print(f"ipuexp: {err}" if isinstance(err, NoTrialCompleted) else str(err), file=sys.stderr)
    sys.exit(1)


_UNKNOWN = object()


def _hydra_entry(argv: List[str], mode: Any = _UNKNOWN) -> None:
    """Hydra's main over ``argv``. ``mode``: ``hydra.mode`` as the pre-flight check composed it, which Hydra
    would otherwise compose the whole configuration once more to read (``Hydra.get_mode``, Hydra 1.3)."""
    import hydra

    from ipuexp.config.store import CONF_PATH, register

    register()
    if mode is not _UNKNOWN:
        from hydra._internal.hydra import Hydra

        if hasattr(Hydra, "get_mode"):
            Hydra.get_mode = lambda self, config_name, overrides: mode

    @hydra.main(version_base=None, config_path=CONF_PATH, config_name="config")
    def _job(cfg: ConfigNode) -> Any:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        from ipuexp.app import run_job, sweep_return
        from ipuexp.tracking.runs import StoreFailed

        try:
            outcome = run_job(cfg)
        except StoreFailed as err:  # a single run: one line naming the store and the result kept on disk
            if HydraConfig.get().mode == RunMode.MULTIRUN:
                raise  # a sweep's job: a failed point, its line in the sweep's summary
            print(f"ipuexp: {err}", file=sys.stderr)
            raise SystemExit(1) from None
        # A configuration that does not fit is a result, exit status 0, unless the user asked scripts to be told.
        if getattr(outcome, "fits", None) is False and cfg.report.get("fail_on_oom", False) \
                and HydraConfig.get().mode != RunMode.MULTIRUN:
            raise SystemExit(EXIT_DOES_NOT_FIT)
        return sweep_return(outcome)

    # The job's log is __main__.log, named after python -m ipuexp's door, wherever the command's module lives.
    named = any(a.startswith("hydra.job.name=") for a in argv)
    sys.argv = [sys.argv[0]] + argv + ([] if named else ["hydra.job.name=__main__"])
    _job()


def leave(code: Any) -> None:
    """End the process with ``code`` (a ``SystemExit`` code) without tearing the interpreter down: Hydra, NumPy,
    matplotlib and, where the process tracked its runs itself, MLflow's few thousand modules take 0.1 to 0.5 s to
    tear down after the answer is out. What the process wrote is flushed first: the exit handlers run (a run's
    safety net, the recorder's close, Ray's shutdown), then logging's handlers and the standard streams. With
    threads of its own still working (none daemonic), the process ends as usual."""
    import threading

    if any(t is not threading.main_thread() and not t.daemon for t in threading.enumerate()):
        sys.exit(code)
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    import atexit
    import logging

    from ipuexp.runner.forking import flush_streams

    atexit._run_exitfuncs()
    logging.shutdown()
    flush_streams()
    os._exit(code or 0)


if __name__ == "__main__":
    try:
        main()
    except SystemExit as done:
        leave(done.code)
    leave(0)
