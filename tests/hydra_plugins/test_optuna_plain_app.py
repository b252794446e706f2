"""``hydra/sweeper=optuna`` for a Hydra app other than ``python -m ipuexp``: the study hydra-optuna-sweeper 1.2 runs.

The reference is that plugin's loop on Optuna itself: its distributions for the override grammar (``range`` with its
stop, ``interval`` a float), its sampler settings, ``n_jobs`` trials asked at a time, each told the value (or tuple)
its job returned, minimised unless told otherwise. The sweep must ask the same trials, hand the same overrides to
its jobs and write the same best point."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List

import optuna
import pytest
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

SPACE = ["x=range(-2,2)", "y=choice(-1,0,1)", "z=interval(0.5,1.5)"]
REFERENCE_SPACE = {"x": IntDistribution(-2, 2), "y": CategoricalDistribution([-1, 0, 1]),
                   "z": FloatDistribution(0.5, 1.5)}


def sphere(cfg: Any) -> float:
    return cfg.x ** 2 + cfg.y ** 2 + cfg.z


def two_values(cfg: Any) -> Any:
    return cfg.x ** 2 + cfg.z, (cfg.x - 1) ** 2 - cfg.y


def _reference(sampler: Any, dirs: List[str], fn: Callable, n_trials: int, n_jobs: int) -> Any:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=sampler, directions=dirs)
    overrides: List[List[str]] = []
    while len(study.trials) < n_trials:
        trials = [study.ask() for _ in range(min(n_jobs, n_trials - len(study.trials)))]
        for t in trials:
            for name, d in REFERENCE_SPACE.items():
                t._suggest(name, d)
            overrides.append([f"{k}={v}" for k, v in t.params.items()])
        for t in trials:
            value = fn(OmegaConf.create(t.params))
            study.tell(t, values=list(value) if isinstance(value, tuple) else [value])
    return study, overrides


def _sweep(tmp_path: Path, fn: Callable, launcher: str, extra: List[str]) -> Path:
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    (conf / "config.yaml").write_text("x: 0\ny: 0\nz: 0.0\n")
    sweep = tmp_path / "sweep"
    with initialize_config_dir(config_dir=str(conf), version_base=None, job_name="app"):
        GlobalHydra.instance().hydra.multirun(
            config_name="config", task_function=fn, with_log_configuration=False,
            overrides=["hydra/sweeper=optuna", f"hydra/launcher={launcher}", "hydra.mode=MULTIRUN",
                       f"hydra.sweep.dir={sweep}", "hydra.sweeper.n_jobs=2", *extra, *SPACE])
    return sweep


def _jobs(sweep: Path) -> List[List[str]]:
    jobs = sorted((p for p in sweep.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    return [[str(o) for o in OmegaConf.load(j / ".hydra" / "overrides.yaml")] for j in jobs]


@pytest.mark.parametrize("launcher", ["basic", "ipuexp"])
def test_a_returned_float_is_minimised_as_by_hydra_optuna_sweeper(tmp_path, launcher, hydra_restore_singletons):
    sweep = _sweep(tmp_path, sphere, launcher, ["hydra.sweeper.n_trials=12", "hydra.sweeper.sampler.seed=123"])
    with warnings.catch_warnings():  # Optuna 5 calls some of the plugin's TPE settings deprecated
        warnings.simplefilter("ignore")
        sampler = optuna.samplers.TPESampler(seed=123, consider_prior=True, prior_weight=1.0,
                                             consider_magic_clip=True, consider_endpoints=False, n_startup_trials=10,
                                             n_ei_candidates=24, multivariate=False, warn_independent_sampling=True)
    study, overrides = _reference(sampler, ["minimize"], sphere, 12, 2)
    assert _jobs(sweep) == overrides
    results: Dict[str, Any] = OmegaConf.to_container(OmegaConf.load(sweep / "optimization_results.yaml"))
    assert results["name"] == "optuna" and results["directions"] == ["minimize"]
    assert results["best_params"] == study.best_trial.params and results["best_value"] == study.best_value


@pytest.mark.parametrize("launcher", ["basic", "ipuexp"])
def test_a_returned_tuple_is_a_multi_objective_study(tmp_path, launcher, hydra_restore_singletons):
    sweep = _sweep(tmp_path, two_values, launcher, [
        "hydra/sweeper/sampler=nsgaii", "hydra.sweeper.sampler.seed=7", "hydra.sweeper.n_trials=6",
        "hydra.sweeper.direction=[minimize,maximize]"])
    sampler = optuna.samplers.NSGAIISampler(seed=7, population_size=50, mutation_prob=None, crossover_prob=0.9,
                                            swapping_prob=0.5)
    study, overrides = _reference(sampler, ["minimize", "maximize"], two_values, 6, 2)
    assert _jobs(sweep) == overrides
    results = OmegaConf.to_container(OmegaConf.load(sweep / "optimization_results.yaml"))
    front = sorted(study.best_trials, key=lambda t: t.number)
    assert [(s["params"], s["values"]) for s in results["solutions"]] == [(t.params, t.values) for t in front]


def test_a_bad_setting_of_a_plain_app_is_one_line(tmp_path):
    """Checked when the study starts, before any job: one line naming the key, as Hydra prints a compact error."""
    import subprocess
    import sys

    (tmp_path / "app.py").write_text(
        "import hydra\n\n@hydra.main(version_base=None, config_path=None, config_name=None)\n"
        "def main(cfg):\n    return 1.0\n\nif __name__ == '__main__':\n    main()\n")
    for setting, line in [("hydra.sweeper.n_trials=0", "hydra.sweeper.n_trials=0 is invalid: allowed: an integer"),
                          ("hydra.sweeper.objectives=[mfu]", "hydra.sweeper.objectives=['mfu'] is invalid: allowed: "
                                                             "null in a Hydra app other than python -m ipuexp")]:
        proc = subprocess.run([sys.executable, "app.py", "-m", "hydra/sweeper=optuna", setting, "+x=range(1,3)"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 1
        # Hydra's compact error: its one line, then Hydra's own hint; no traceback
        lines = [text for text in proc.stderr.splitlines() if text]
        assert len(lines) == 2 and lines[0].startswith(line) and lines[1].startswith("Set the environment variable "
                                                                                    "HYDRA_FULL_ERROR=1"), proc.stderr


def test_a_stored_study_of_a_plain_app_gets_n_trials_more_each_run(tmp_path, hydra_restore_singletons):
    """As hydra-optuna-sweeper: the named study is loaded and runs ``n_trials`` more trials, job folders from 0."""
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    for run in ("one", "two"):
        (tmp_path / run).mkdir()
        sweep = _sweep(tmp_path / run, sphere, "basic", ["hydra.sweeper.n_trials=3", f"hydra.sweeper.storage={storage}",
                                                          "hydra.sweeper.study_name=s"])
        assert sorted(p.name for p in sweep.iterdir() if p.name.isdigit()) == ["0", "1", "2"]
    assert len(optuna.load_study(study_name="s", storage=storage).trials) == 6
