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

EXIT_CONFIG_ERROR = 2
EXIT_DOES_NOT_FIT = 3
"""A single run whose configuration does not fit in IPU memory, with ``report.fail_on_oom=true``."""


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


def _axis(override: Any) -> List[str]:
    """The values of one parsed override to check: each value of a choice or range sweep, both ends of an
    interval (an optimisation sweeper's continuous search space: ``interval(0.1,0.4)``, ``tag(log,interval(...))``)."""
    from ipuexp.config.errors import ConfigError

    key = override.get_key_element()
    if not override.is_sweep_override():
        return [override.input_line]
    if key.lstrip("+~").startswith("hydra."):
        raise ConfigError(key, override.get_value_element_as_str(), "allowed: one value (Hydra sweeps no hydra.* key); "
                          "an optimisation sweeper's search space goes on the key itself or, quoted, in "
                          "hydra.sweeper.params (e.g. 'hydra.sweeper.params.NAME=\"choice(1,2)\"')")
    if override.is_interval_sweep():
        value = override.value()
        return [f"{key}={value.start}", f"{key}={value.end}"]
    try:
        values = [f"{key}={v}" for v in override.sweep_string_iterator()]
    except Exception as err:  # range(1,5,0), glob() of a key that is no config group, ...
        why = " ".join(str(err).split())
        raise ConfigError(key, override.input_line.split("=", 1)[-1], f"allowed: a sweep Hydra can list ({why}; "
                          "glob() lists a config group's options, e.g. system=glob(pod*))") from None
    if not values:
        text = override.input_line.split("=", 1)[-1]
        raise ConfigError(key, text, "allowed: a glob() matching options of a config group (e.g. system=glob(pod*))"
                          if text.lstrip().startswith("glob(") else "allowed: a sweep of at least one value "
                          "(range(a,b) needs b > a for a positive step, b < a for a negative one)")
    return values


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


def sweep_points(overrides: List[str]) -> List[List[str]]:
    """The sweep points that try every swept value once: the first point, then that point with one swept key set
    to each of its other values (``a=1,2 b=x,y`` gives ``a=1 b=x``, ``a=2 b=x``, ``a=1 b=y``). An interval
    (``interval(0.1,0.4)``, for an optimisation sweeper) is tried at both ends."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    from ipuexp.config.errors import unparsable

    axes = _axes(overrides)
    first = [axis[0] for axis in axes]
    return [first] + [first[:i] + [value] + first[i + 1:] for i, axis in enumerate(axes) for value in axis[1:]]


def _axes(overrides: List[str]) -> List[List[str]]:
    """Each override's values to check (``_axis``), in order."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    from ipuexp.config.errors import unparsable

    try:
        parsed = OverridesParser.create(config_loader=_config_loader()).parse_overrides(overrides)
    except OverrideParseException as exc:
        raise unparsable(exc.override, exc.message) from None
    return [_axis(ov) for ov in parsed]


def _record_aside(cfg: ConfigNode, overrides: List[str]) -> None:
    """A tracked grid sweep that will run in this process leaves its MLflow work to a recorder
    (:mod:`ipuexp.tracking.recorder`), forked now, so that MLflow is imported and the store opened while Hydra
    composes the sweep."""
    import math

    from ipuexp.tracking import recorder
    from ipuexp.tracking.hydra_callback import records_aside

    recorder.allow()
    if records_aside(cfg, math.prod(len(axis) for axis in _axes(overrides))):
        from ipuexp.tracking.store import tracking_uri

        recorder.start_early(tracking_uri(cfg))


def _config_loader() -> Any:
    """Hydra's config loader over ipuexp's configs: what ``glob()`` sweeps list a config group's options from."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path

    from ipuexp.config.store import CONF_PATH, register

    register()
    return ConfigLoaderImpl(config_search_path=create_config_search_path(CONF_PATH))


def check_optimiser(cfg: ConfigNode, overrides: List[str]) -> None:
    """What ipuexp's Optuna sweeper would refuse once started, checked before it starts: its settings, objectives
    and their directions, its search space (under the grid sampler one it can list) and its sampler's settings."""
    sweeper = cfg.hydra.sweeper
    if not str(sweeper.get("_target_", "")).endswith("OptunaSweeper"):
        return
    from hydra.utils import instantiate

    from ipuexp.sweeps.optuna_checks import check_sampler, check_settings
    from ipuexp.sweeps.optuna_space import directions, grid, space

    check_settings(sweeper)
    directions(list(sweeper.objectives), sweeper.direction)
    params = [f"{k}={v}" for k, v in (sweeper.params or {}).items()]
    trial_space = space(params + [o for o in overrides if not o.startswith("hydra")])
    is_grid = str(sweeper.sampler.get("_target_", "")).endswith("GridSampler")
    check_sampler(instantiate(sweeper.sampler), grid(trial_space.distributions) if is_grid else None)


def search_space_points(cfg: ConfigNode, first: List[str]) -> List[List[str]]:
    """For an optimisation sweeper, the first point with each value of ``hydra.sweeper.params`` (a preset's or a
    quoted command-line search space) that the command line does not replace: Hydra's basic sweeper's params
    are the command line's sweeps once the sweep starts, an optimisation sweeper's are its search space."""
    from ipuexp.app import GRID_SWEEPERS

    params = cfg.hydra.sweeper.get("params") if "sweeper" in cfg.hydra else None
    if not params or cfg.hydra.runtime.choices.get("hydra/sweeper") in GRID_SWEEPERS:
        return []
    given = {o.split("=", 1)[0].lstrip("+~") for o in first}
    space = [f"{k}={v}" for k, v in params.items() if str(k) not in given]
    return [first + [value] for point in sweep_points(space) for value in point] if space else []


def main(argv: Optional[List[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("--help", "-h") for a in argv):
        from ipuexp.cli_help import text

        print(text())
        return
    from ipuexp.config.errors import ConfigError
    mode = _UNKNOWN
    if not _wants_hydra_only(argv):
        overrides = [a for a in argv if not a.startswith("-")]
        try:
            # The first point is composed and validated; every other swept value is composed once, so a value the
            # schema rejects stops the sweep here. A rule broken by one combination fails that job alone.
            first, *others = sweep_points(overrides) if _is_multirun(argv) else [overrides]
            cfg = preflight(first)
            mode = cfg.hydra.get("mode")
            check_outputs(cfg, _is_multirun(argv))
            if not _is_multirun(argv) and cfg.tracking.enabled:
                from ipuexp.tracking.recorder import defer_run

                defer_run(cfg)  # MLflow is imported and its store opened beside the job
            if _is_multirun(argv):
                from ipuexp.runner.placement import check_launcher

                check_optimiser(cfg, overrides)
                check_launcher(cfg.hydra.launcher)
                others += search_space_points(cfg, first)
            from ipuexp.config.swept_values import check_points

            check_points(cfg, first, others, lambda point: preflight(point, rules=False))
        except ConfigError as err:
            print(f"ipuexp: config error: {err}", file=sys.stderr)
            sys.exit(EXIT_CONFIG_ERROR)
    optimiser = _is_multirun(argv) and any(a.startswith("hydra/sweeper=") and a.split("=", 1)[1] not in
                                            ("ipuexp", "basic") for a in argv)
    multirun = _is_multirun(argv)
    if multirun:
        if mode is not _UNKNOWN and cfg.tracking.enabled:
            _record_aside(cfg, overrides)
        # Hydra prints what a sweep raises, then a HYDRA_FULL_ERROR hint; let it through to be told apart (below).
        os.environ.setdefault("HYDRA_FULL_ERROR", "1")
    try:
        _hydra_entry(argv, mode)
    except KeyboardInterrupt:
        print("ipuexp: interrupted", file=sys.stderr)
        sys.exit(130)
    except ConfigError as err:  # a setting only the sweeper can check (a stored study's search space)
        if not multirun:
            raise
        if not optimiser:
            print(str(err), file=sys.stderr)
            sys.exit(1)
        print(f"ipuexp: config error: {err}", file=sys.stderr)
        sys.exit(EXIT_CONFIG_ERROR)
    except Exception as err:
        from hydra.errors import CompactHydraException

        from ipuexp.runner.errors import JobFailedError
        from ipuexp.sweeps.optuna_results import NoTrialCompleted

        if not multirun or not isinstance(err, CompactHydraException):
            raise
        # A grid sweep's failed point: the sweep's summary has listed it with its log file; exit 1 without the
        # error again. A study without a completed trial, or a failed trial it stops on
        # (hydra.sweeper.max_failure_rate): its one line, as Hydra prints it.
        if not (isinstance(err, JobFailedError) and not optimiser):
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
    def _job(cfg):
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

    sys.argv = [sys.argv[0]] + argv
    _job()


def leave(code: Any) -> None:
    """End the process with ``code`` (a ``SystemExit`` code) once MLflow is loaded, without tearing the interpreter
    down: MLflow brings SQLAlchemy, pandas and a few thousand modules whose teardown takes about half a second after
    the run has ended. What the process wrote is flushed first: the exit handlers run (a run's safety net, Ray's
    shutdown), then logging's handlers and the standard streams. With threads of its own still working (none
    daemonic), or without MLflow, the process ends as usual."""
    import threading

    if "mlflow" not in sys.modules or any(t is not threading.main_thread() and not t.daemon
                                          for t in threading.enumerate()):
        sys.exit(code)
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    import atexit
    import logging

    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code or 0)


if __name__ == "__main__":
    try:
        main()
    except SystemExit as done:
        leave(done.code)
    leave(0)
