"""ipuexp's Optuna sweeper settings, registered (by ``hydra_plugins.ipuexp.optuna_sweeper``) as ``hydra/sweeper:
optuna`` with its samplers as ``hydra/sweeper/sampler: tpe | random | grid | nsgaii | qmc | gp | bruteforce |
cmaes``.

The settings are hydra-optuna-sweeper 1.2's (``sampler``, ``direction``, ``storage``, ``study_name``, ``n_trials``,
``n_jobs``, ``max_failure_rate``, ``search_space``, ``params``, ``custom_search_space``) on current Optuna; what
ipuexp adds is ``objectives``, the run metrics its own jobs are judged by. Where a default differs between ipuexp's
own jobs and another Hydra app, it is None here and the study picks it (``optuna_study``).
"""
# No "from __future__ import annotations": Hydra's ConfigStore reads these dataclasses' annotations as types.
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from omegaconf import MISSING


@dataclass
class SamplerConf:
    _target_: str = MISSING
    _partial_: bool = True  # built when the study starts: a resumed study's seed moves on, the grid is the space
    seed: Optional[int] = None
    """Seed of the sampler's random draws (None: a new one each study). A resumed study's sampler draws from
    ``seed`` plus the trials it has, so it does not propose the earlier runs' points again."""


@dataclass
class TPESamplerConf(SamplerConf):
    """optuna.samplers.TPESampler: a model of good and bad trials (single- and multi-objective)."""

    _target_: str = "optuna.samplers.TPESampler"
    n_startup_trials: int = 10
    """Random trials before the model takes over."""
    n_ei_candidates: int = 24
    """Candidates the model scores per trial."""
    multivariate: bool = False
    """Model the parameters jointly (Optuna calls it experimental)."""


@dataclass
class RandomSamplerConf(SamplerConf):
    """optuna.samplers.RandomSampler."""

    _target_: str = "optuna.samplers.RandomSampler"


@dataclass
class GridSamplerConf(SamplerConf):
    """optuna.samplers.GridSampler: every point of the choices and ranges once (the study ends with the grid)."""

    _target_: str = "optuna.samplers.GridSampler"


@dataclass
class NSGAIISamplerConf(SamplerConf):
    """optuna.samplers.NSGAIISampler: a genetic search for the Pareto front of several objectives."""

    _target_: str = "optuna.samplers.NSGAIISampler"
    population_size: int = 50
    """Trials per generation."""
    mutation_prob: Optional[float] = None
    """Chance a parameter mutates (None: 1 / number of parameters)."""
    crossover_prob: float = 0.9
    """Chance a child crosses two parents."""
    swapping_prob: float = 0.5
    """Chance each parameter comes from the other parent."""


@dataclass
class QMCSamplerConf(SamplerConf):
    """optuna.samplers.QMCSampler: quasi-random points that cover the space evenly."""

    _target_: str = "optuna.samplers.QMCSampler"
    qmc_type: str = "sobol"
    """sobol or halton."""
    scramble: bool = False
    """Scramble the sequence (with ``seed``)."""


@dataclass
class GPSamplerConf(SamplerConf):
    """optuna.samplers.GPSampler: Bayesian optimisation with a Gaussian process (PyTorch)."""

    _target_: str = "optuna.samplers.GPSampler"
    n_startup_trials: int = 10
    """Random trials before the process takes over."""
    deterministic_objective: bool = True
    """The emulator's prediction of a configuration is the same every time."""


@dataclass
class BruteForceSamplerConf(SamplerConf):
    """optuna.samplers.BruteForceSampler: every point of a discrete space, in random order."""

    _target_: str = "optuna.samplers.BruteForceSampler"


@dataclass
class CmaEsSamplerConf(SamplerConf):
    """optuna.samplers.CmaEsSampler: CMA-ES over continuous parameters (needs the ``cmaes`` package)."""

    _target_: str = "optuna.samplers.CmaEsSampler"
    x0: Optional[Dict[str, Any]] = None
    """Where the search starts (None: the middle of the space)."""
    sigma0: Optional[float] = None
    """The search's first step size."""
    n_startup_trials: int = 1
    """Trials drawn by the independent sampler first."""


@dataclass
class OptunaSweeperConf:
    _target_: str = "hydra_plugins.ipuexp.optuna_sweeper.OptunaSweeper"
    defaults: List[Any] = field(default_factory=lambda: [{"sampler": "tpe"}])
    sampler: SamplerConf = MISSING
    """The Optuna sampler (``hydra/sweeper/sampler=...``)."""
    objectives: Optional[List[str]] = None
    """ipuexp's jobs: the run metrics a trial is judged by: throughput_samples_per_s (None), step_time_s, mfu,
    peak_tile_memory_bytes, peak_ipu_memory_bytes; two or more make a multi-objective study (its Pareto front is
    the result). Another Hydra app: null; its trials are judged by the value(s) its task function returns."""
    direction: Any = None
    """maximize or minimize, one for all objectives or one each; None: each objective's own (throughput and MFU
    up, step time and memory down). Another Hydra app: one direction (None: minimize) for a returned value, a list
    of one per value for a returned tuple (a multi-objective study)."""
    storage: Optional[str] = None
    """Optuna storage URL (``sqlite:///study.db``): the study is kept there, and a rerun resumes it."""
    study_name: Optional[str] = None
    """The study's name in ``storage``; None: the MLflow experiment's (``tracking.experiment``, else the recipe)."""
    n_trials: int = 20
    """Trials the study has when it ends: a rerun on a stored study runs only those it lacks (interrupted ones
    again); fewer under the grid sampler when the grid is smaller."""
    n_jobs: int = 2
    """Trials handed to the launcher at a time."""
    max_failure_rate: Optional[float] = None
    """Share of a batch's trials that may fail before the study stops: 1.0 goes on whatever fails. None: 1.0 for
    ipuexp's jobs (a configuration that does not fit is a failed trial), 0.0 for another Hydra app."""
    search_space: Optional[Dict[str, Any]] = None
    """Deprecated (as in hydra-optuna-sweeper): ``NAME: {type: int | float | categorical, low, high, step, log,
    choices}``, read with a warning when ``params`` is not set."""
    params: Optional[Dict[str, str]] = None
    """The search space in Hydra's override grammar (``choice``, ``range``, ``interval``, ``tag(log, ...)``); the
    command line's sweeps add to it and win."""
    custom_search_space: Optional[str] = None
    """Dotted path of a callable ``(config, optuna.trial.Trial) -> None`` that suggests more parameters."""


SAMPLERS = {"tpe": TPESamplerConf, "random": RandomSamplerConf, "grid": GridSamplerConf, "nsgaii": NSGAIISamplerConf,
            "qmc": QMCSamplerConf, "gp": GPSamplerConf, "bruteforce": BruteForceSamplerConf, "cmaes": CmaEsSamplerConf}
"""The samplers by their ``hydra/sweeper/sampler`` name."""
