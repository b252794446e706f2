"""The study of ipuexp's Optuna sweeper (``hydra/sweeper=optuna``; the plugin class is
``hydra_plugins.ipuexp.optuna_sweeper``, since Hydra instantiates plugins from ``hydra_plugins`` only).

Optuna is asked for ``n_jobs`` trials at a time; they run as one batch of the launcher, and each job's run metrics
(``ipuexp.result.Objective.metrics``) give the trial its objective values (another Hydra app's trials are judged by
what its task function returns, as under hydra-optuna-sweeper: ``optuna_tell``). A configuration that does not fit
fails its job with ``DoesNotFit``: a FAILED trial, the study goes on. With ``storage`` the study lives in that
database: a rerun with the same ``study_name`` loads it, checks that it has the same search space and objectives,
runs again the trials an interrupted run left RUNNING and then only as many new ones as ``n_trials`` still lacks.
Each job's number is its trial's number, so job folder ``N`` is trial ``N`` of the study. Another Hydra app's stored
study is kept as hydra-optuna-sweeper keeps it: ``n_trials`` more trials each run.

Every batch goes through ``ipuexp.runner.tally.Tallied``: progress numbered over the study, no table per batch,
and at the end one summary whose best point is the study's best trial (``optuna_results``).
"""
from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from ipuexp.sweeps import optuna_results
from ipuexp.sweeps.optuna_space import Space, directions, from_search_space, grid, objectives_of, space
from ipuexp.sweeps.optuna_tell import own_jobs, tell, told
from ipuexp.runner.summary import log_lines
from ipuexp.runner.tally import Tallied, Tally, show_summary

if TYPE_CHECKING:
    from ipuexp.config.types import ConfigNode

log = logging.getLogger(__name__)

SPACE_ATTR = "ipuexp.search_space"
OBJECTIVES_ATTR = "ipuexp.objectives"
"""Study attributes a resumed study must match: its search space and objectives."""
JOB_DIR_ATTR = "ipuexp.job_dir"
"""Trial attribute: the folder of the job that evaluates it."""
OBJECTIVE_FILE = "objective.json"
"""What a job returned to the sweeper, in its folder (``ipuexp.app.sweep_return``): a trial whose driver was killed
after its job finished, before the study was told, is told from it when the study resumes."""
RERUN_ATTR = "ipuexp.rerun_of"
"""Trial attribute of a trial queued again for one an interrupted run left RUNNING: that trial's number."""


def run_study(sweeper: Any, arguments: List[str]) -> None:
    """Run ``sweeper``'s study (an ``OptunaSweeper``'s settings, launcher and config) over the search space of
    ``hydra.sweeper.params`` and ``arguments``, then write its results and print the sweep's summary."""
    import optuna

    from ipuexp.sweeps.optuna_checks import check_settings

    _plain_optuna_logging()
    check_settings(sweeper)
    config = sweeper.config
    own = own_jobs(config)
    params = [f"{k}={v}" for k, v in (sweeper.params or {}).items()]
    trial_space = space(params + list(arguments))
    for key, d in from_search_space(sweeper.search_space, sweeper.params).items():
        if key not in trial_space.distributions and key not in trial_space.fixed:
            trial_space.distributions[key] = d
    objectives = objectives_of(sweeper.objectives, own)
    dirs = directions(objectives, sweeper.direction)
    max_failure_rate = sweeper.max_failure_rate if sweeper.max_failure_rate is not None else 1.0 if own else 0.0
    name = sweeper.study_name or (_default_name(config) if sweeper.storage and own else None)
    study = optuna.create_study(study_name=name, storage=sweeper.storage, directions=dirs, load_if_exists=True,
                                sampler=optuna.samplers.RandomSampler())  # replaced once the trials are counted
    # Another Hydra app's stored study, as hydra-optuna-sweeper keeps it: n_trials more trials each run.
    done = _resume(study, trial_space, objectives, dirs) if own else 0
    sampler, n_trials = _sampler(sweeper.sampler, trial_space, sweeper.n_trials, len(study.trials) if own else 0)
    study.sampler = sampler
    to_run = max(0, n_trials - done)
    log.info(f"Study name: {study.study_name}")
    log.info(f"Storage: {sweeper.storage}")
    log.info(f"Sampler: {type(sampler).__name__}")
    log.info(log_lines(f"Directions: {dirs}" + (f" ({', '.join(objectives)})" if objectives else "")))
    if done and to_run:
        log.info(f"Resumed: {done} of hydra.sweeper.n_trials={n_trials} trials finished before; {to_run} to run")
    elif done:
        log.info(f"Resumed: the study has finished {done} trials, hydra.sweeper.n_trials={n_trials}: nothing to "
                 "run (a larger n_trials extends it)")

    sweep_dir = Path(str(config.hydra.sweep.dir))
    tally = Tally(total=to_run, show=show_summary(config))
    launcher = Tallied(sweeper.launcher, tally)
    extend = _extender(sweeper.custom_search_space)
    title = f"Sweep {sweep_dir}"
    try:
        while to_run > 0:
            trials = [study.ask() for _ in range(min(sweeper.n_jobs, to_run))]
            overrides = [_overrides(t, trial_space, extend, config) for t in trials]
            first = _first_job(trials, tally) if own else tally.done
            for pos, t in enumerate(trials):
                sub = _subdir(config, first + pos)
                if sub is not None:
                    t.set_user_attr(JOB_DIR_ATTR, str(sweep_dir.resolve() / sub))
            returns = launcher.launch(overrides, initial_job_idx=first)
            for pos, why in tell(study, trials, returns, objectives, max_failure_rate):
                tally.refuse(first + pos, why)
            to_run -= len(trials)
    except BaseException:
        tally.print(title)
        raise
    path = sweep_dir / optuna_results.RESULTS
    top, source, notes = optuna_results.write(study, objectives, path, tally.outcomes)
    tally.print(title, top=top, source=source, notes=notes)
    optuna_results.check_completed(study)
    if not own:  # what hydra-optuna-sweeper logs of its study
        optuna_results.log_best(study)


def _sampler(sampler: Any, trial_space: Space, n_trials: int, before: int) -> Tuple[Any, int]:
    """The sampler (Hydra's partial of it), built for a study that has ``before`` trials already, and the trials
    the study will have: the grid sampler gets the space's grid and at most as many trials as it has points."""
    from optuna.samplers import GridSampler

    from ipuexp.sweeps.optuna_checks import check_sampler

    if not isinstance(sampler, functools.partial):  # built already (a sampler config without _partial_)
        return sampler, n_trials
    seed = sampler.keywords.get("seed")
    kwargs = {"seed": seed + before} if seed is not None and before else {}
    if sampler.func is GridSampler:
        values = grid(trial_space.distributions)
        points = 1
        for v in values.values():
            points *= len(v)
        return check_sampler(sampler, values, **kwargs), min(n_trials, points)
    return check_sampler(sampler, **kwargs), n_trials


def _default_name(config: ConfigNode) -> str:
    """A stored study's name when none is given: the MLflow experiment's, so a rerun finds it."""
    from omegaconf import OmegaConf

    for key in ("tracking.experiment", "recipe"):
        value = OmegaConf.select(config, key, default=None)
        if value:
            return str(value)
    return "ipuexp"


def _resume(study: Any, trial_space: Space, objectives: Sequence[str], dirs: Sequence[str]) -> int:
    """Trials the study has finished. A study loaded from storage must have the same search space, objectives
    and directions; a trial left RUNNING by an interrupted run is failed and queued to run again."""
    from optuna.trial import TrialState

    from ipuexp.config.errors import ConfigError

    signature = trial_space.signature()
    stored = study.user_attrs
    if SPACE_ATTR not in stored:
        study.set_user_attr(SPACE_ATTR, signature)
        study.set_user_attr(OBJECTIVES_ATTR, list(objectives))
    else:
        mine = (signature, list(objectives), [d.lower() for d in dirs])
        theirs = (stored[SPACE_ATTR], stored.get(OBJECTIVES_ATTR),
                  [d.name.lower() for d in study.directions])
        if mine != theirs:
            differs = [k for k, a, b in zip(("search space", "objectives", "directions"), mine, theirs) if a != b]
            raise ConfigError("hydra.sweeper.study_name", study.study_name,
                              f"its stored study has another {' and '.join(differs)}; allowed: the same sweep, or a "
                              "new study_name for this one")
    done = 0
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.RUNNING:
            values = _finished_job(t, objectives)
            if values is not None:  # its job ended before the study was told: told now, not evaluated again
                told(study, t.number, values=values)
                done += 1
                continue
            study.tell(t.number, state=TrialState.FAIL)
            study.enqueue_trial(t.params, user_attrs={RERUN_ATTR: t.number})
        elif t.state.is_finished():
            done += 1
    return done


def _finished_job(trial: Any, objectives: Sequence[str]) -> Optional[List[float]]:
    """The objective values a trial's job left in its folder (``OBJECTIVE_FILE``), or None."""
    import json

    folder = trial.user_attrs.get(JOB_DIR_ATTR)
    if not folder:
        return None
    try:
        kept = json.loads((Path(folder) / OBJECTIVE_FILE).read_text())
        return [float(kept["metrics"][name]) for name in objectives]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _subdir(config: ConfigNode, idx: int) -> Optional[str]:
    """Job ``idx``'s folder under the sweep folder when ``hydra.sweep.subdir`` is Hydra's default (the job's
    number), else None (a folder only the job resolves)."""
    raw = str(config.hydra.sweep._get_node("subdir")._value())
    return str(idx) if raw.strip() == "${hydra.job.num}" else None


def _extender(path: Optional[str]) -> Any:
    if not path:
        return None
    from hydra.utils import get_method

    return get_method(path)


def _overrides(trial: Any, trial_space: Space, extend: Any, config: ConfigNode) -> Tuple[str, ...]:
    """A trial's job overrides: a value of each distribution (asked of the trial), then the fixed values."""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    for key, d in trial_space.distributions.items():
        if isinstance(d, CategoricalDistribution):
            trial.suggest_categorical(key, d.choices)
        elif isinstance(d, IntDistribution):
            trial.suggest_int(key, d.low, d.high, step=d.step, log=d.log)
        else:
            trial.suggest_float(key, d.low, d.high, step=d.step, log=d.log)
    if extend is not None:
        extend(config, trial)
    clash = set(trial.params) & set(trial_space.fixed)
    if clash:
        from ipuexp.config.errors import ConfigError

        key = sorted(clash)[0]
        raise ConfigError(key, trial_space.fixed[key], "allowed: a key either fixed or searched, not both")
    values: Dict[str, Any] = dict(trial.params)
    values.update(trial_space.fixed)
    if RERUN_ATTR in trial.user_attrs:
        # An interrupted run's trial: its job may have finished before the trial was told. The job then takes its
        # figures from that FINISHED run in MLflow instead of evaluating the configuration again.
        values.setdefault("tracking.skip_completed", "true")
    return tuple(f"{k}={v}" for k, v in values.items())


def _first_job(trials: Sequence[Any], tally: Tally) -> int:
    """The batch's first job number: its first trial's, when the batch's trials are numbered one after another
    (they are, unless another process adds trials to the same stored study)."""
    numbers = [t.number for t in trials]
    if numbers == list(range(numbers[0], numbers[0] + len(numbers))):
        return numbers[0]
    return max([o.idx + 1 for o in tally.outcomes], default=0)


def _plain_optuna_logging() -> None:
    """Optuna's records through the root logger (Hydra's handlers, no colour), warnings and worse only: the
    sweeper itself says which study it made."""
    import optuna

    optuna.logging.disable_default_handler()
    optuna.logging.enable_propagation()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
