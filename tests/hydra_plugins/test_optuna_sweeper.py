"""ipuexp's Optuna sweeper drives ``python -m ipuexp -m hydra/sweeper=optuna``: each job returns its run metrics, a
configuration that does not fit is a FAILED trial, the sweep finishes, and a study in a database resumes."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[2]

# bert_base at micro-batch 64 does not fit (tile memory); 16 and 32 do. The seeded random sampler draws both kinds
# (the grid sampler, whose order is random, has its own tests below).
SEARCH = ["hydra/sweeper=optuna", "hydra/sweeper/sampler=random", "hydra.sweeper.sampler.seed=0", "+recipe=bert_base", "hydra.sweeper.n_trials=6",
          "hydra.sweeper.n_jobs=2", "data.micro_batch_size=choice(16,32,64)",
          "options.gradient_accumulation=choice(512,1024)"]


def _sweep(cwd: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MLFLOW_TRACKING_URI", None)
    args = [sys.executable, "-m", "ipuexp", "-m", *SEARCH, "hydra.sweep.dir=sweep", *extra]
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _trials(cwd: Path) -> List[Dict]:
    """Each trial's parameters (its job's overrides) and outcome (its result.json)."""
    import json

    from omegaconf import OmegaConf

    trials = []
    for job in sorted((cwd / "sweep").glob("[0-9]*")):
        overrides = [str(o) for o in OmegaConf.load(job / ".hydra" / "overrides.yaml")]
        params = {k: int(v) for k, v in (o.split("=", 1) for o in overrides) if k in ("data.micro_batch_size",
                                                                                     "options.gradient_accumulation")}
        result = json.loads((job / "result.json").read_text())
        trials.append({"params": params, "fits": result["fits"], "value": result["throughput"]["samples_per_s"]})
    return trials


def _predicted(params: Dict) -> float:
    from ipuexp.runner.evaluation import evaluate
    from ipuexp.config.compose import load_experiment

    exp = load_experiment("+recipe=bert_base", *(f"{k}={v}" for k, v in params.items()))
    return evaluate(exp).result.throughput.samples_per_s


def _check_study(cwd: Path, proc: subprocess.CompletedProcess) -> List[Dict]:
    from omegaconf import OmegaConf

    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    trials = _trials(cwd)
    assert len(trials) == 6
    # Every micro-batch-64 trial does not fit: a FAILED trial (Hydra's Optuna sweeper logs each); the rest complete
    # with their throughput.
    assert all(t["fits"] == (t["params"]["data.micro_batch_size"] != 64) for t in trials)
    oom = sum(1 for t in trials if not t["fits"])
    assert 1 <= oom <= 5
    assert (proc.stdout + proc.stderr).count("Failed experiment: does not fit in IPU memory: Out of memory on tile") == oom
    # Maximised by default: the best of the fitting trials, and the throughput its configuration predicts.
    best = OmegaConf.to_container(OmegaConf.load(cwd / "sweep" / "optimization_results.yaml"))
    fitting = [t for t in trials if t["fits"]]
    top = max(fitting, key=lambda t: t["value"])
    assert best["best_params"] == top["params"] and best["best_value"] == top["value"]
    assert best["best_value"] == pytest.approx(_predicted(best["best_params"]), rel=1e-9)
    return trials


@pytest.mark.slow
def test_optuna_sweep_basic_launcher(tmp_path: Path) -> None:
    proc = _sweep(tmp_path, "hydra/launcher=basic", "tracking.enabled=false")
    trials = _check_study(tmp_path, proc)
    assert "Directions: ['maximize']" in proc.stderr + proc.stdout
    # An out-of-memory trial says it does not fit (above), without Hydra's "Error executing job" line.
    assert "Error executing job" not in proc.stderr + proc.stdout
    _check_summary(tmp_path, proc, trials)


@pytest.mark.slow
def test_optuna_study_ends_with_one_summary(tmp_path: Path) -> None:
    """The default launcher (this process for a study this small): one table and best point at the end, which is
    the study's best as in optimization_results.yaml; values to 4 significant digits; no escape codes."""
    from omegaconf import OmegaConf

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("RAY_ADDRESS", None)
    args = [sys.executable, "-m", "ipuexp", "-m", "hydra/sweeper=optuna", "hydra.sweeper.sampler.seed=0",
            "+recipe=bert_base", "hydra.sweeper.n_trials=6", "hydra.sweeper.n_jobs=2", "tracking.enabled=false",
            "data.micro_batch_size=choice(16,64)", "options.available_memory_proportion=interval(0.1,0.4)",
            "hydra.sweep.dir=sweep"]
    proc = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "\x1b" not in out  # Optuna's coloured log lines go through Hydra's logging
    assert "Launching 2 jobs in this process (6 points" in out and "[6/6] #" in out
    assert "Best parameters" not in out and "Best value" not in out  # the summary says it once
    best = OmegaConf.to_container(OmegaConf.load(tmp_path / "sweep" / "optimization_results.yaml"))
    amp = best["best_params"]["options.available_memory_proportion"]
    assert len(repr(amp)) > 10  # Optuna's own sample, every digit of it in the file
    flat = " ".join(out.split())  # lines break between words to fit the terminal
    line = flat.split("Best fitting point", 1)[1].split(")", 1)[0] + ")"
    assert f"options.available_memory_proportion={amp:.4g} " in line and repr(amp) not in out
    assert f"({best['best_value']:,.1f} samples/s; the study's best, as in sweep/optimization_results.yaml)" in line
    assert re.search(r"\d\.\d{9,}", proc.stdout) is None  # no 17-digit values in what ipuexp prints


def _check_summary(cwd: Path, proc: subprocess.CompletedProcess, trials: List[Dict]) -> None:
    """One table at the end, its best point the study's (optimization_results.yaml)."""
    from omegaconf import OmegaConf

    out = proc.stdout
    flat = " ".join(out.split())  # lines break between words to fit the terminal
    assert flat.count("Sweep sweep: ") == 1 and flat.count("Best fitting point") == 1
    fitting = sum(1 for t in trials if t["fits"])
    assert f"Sweep sweep: {fitting} done, 0 failed, {len(trials) - fitting} out of memory" in flat
    best = OmegaConf.to_container(OmegaConf.load(cwd / "sweep" / "optimization_results.yaml"))
    line = "Best fitting point" + flat.split("Best fitting point", 1)[1].split(")", 1)[0] + ")"
    assert all(f"{k}={v}" in line for k, v in best["best_params"].items())
    assert f"({best['best_value']:,.1f} samples/s; the study's best" in line


@pytest.mark.slow
def test_optuna_sweep_on_ray_tracked(tmp_path: Path, ray_cluster: str) -> None:
    """The ``ray`` launcher (the default) hands back values and FAILED statuses in order, batch after batch, and
    the sweep is one MLflow parent run with a child per trial; an out-of-memory trial's run is FINISHED, fits=0."""
    db = tmp_path / "mlflow.db"
    proc = _sweep(tmp_path, f"tracking.uri=sqlite:///{db}")
    trials = _check_study(tmp_path, proc)
    assert "out of memory" in proc.stdout
    assert "Error executing job" not in proc.stderr + proc.stdout
    _check_summary(tmp_path, proc, trials)

    from mlflow.tracking import MlflowClient

    c = MlflowClient(f"sqlite:///{db}")
    exp = c.get_experiment_by_name("bert_base")
    runs = c.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(children) == len(trials) == 6 and all(r.info.status == "FINISHED" for r in children)
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    oom = [r for r in children if r.data.metrics.get("fits") == 0.0]
    assert len(oom) == sum(1 for t in trials if not t["fits"])
    assert all(r.data.params["data.micro_batch_size"] == "64" for r in oom)


def test_preflight_checks_the_search_space(tmp_path: Path) -> None:
    """Both ends of an interval and each choice are checked before the sweep starts: one line, exit status 2."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "ipuexp", "-m", "hydra/sweeper=optuna", "+recipe=bert_base",
                           "options.pipeline.schedule=choice(grouped,bogus)", "data.micro_batch_size=int(interval(1,8))"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("ipuexp: config error: options.pipeline.schedule='bogus' is invalid")
    assert len(proc.stderr.strip().splitlines()) == 1
    # Hydra's interval is a float range: on an integer key every trial would fail, so it is refused up front.
    proc = subprocess.run([sys.executable, "-m", "ipuexp", "-m", "hydra/sweeper=optuna", "+recipe=bert_base",
                           "data.micro_batch_size=interval(1,8)"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.startswith("ipuexp: config error: data.micro_batch_size='1.0' is invalid")
    # Objectives and directions, and a grid sampler's space, are checked before the study starts.
    for extra, start in [(["hydra.sweeper.objectives=[throughput_samples_per_s,bogus]"],
                          "hydra.sweeper.objectives=['throughput_samples_per_s', 'bogus'] is invalid: allowed: one or "
                          "more of throughput_samples_per_s, "),
                         (["hydra.sweeper.objectives=[throughput_samples_per_s,peak_tile_memory_bytes]",
                           "hydra.sweeper.direction=[maximize]"], "hydra.sweeper.direction=['maximize'] is invalid"),
                         (["hydra/sweeper/sampler=grid", "options.available_memory_proportion=interval(0.1,0.4)"],
                          "options.available_memory_proportion='interval(0.1, 0.4)' is invalid: allowed: choice(...) "
                          "or range(...) under the grid sampler")]:
        proc = subprocess.run([sys.executable, "-m", "ipuexp", "-m", "hydra/sweeper=optuna", "+recipe=bert_base",
                               "data.micro_batch_size=choice(16,32)", *extra], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert proc.stderr.startswith(f"ipuexp: config error: {start}"), proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


def test_sweeper_defaults() -> None:
    """``hydra/sweeper=optuna`` is ipuexp's sweeper, found among Hydra's plugins: it maximises the throughput and
    keeps going past failed trials unless told otherwise."""
    from hydra.core.plugins import Plugins
    from hydra.plugins.sweeper import Sweeper

    from ipuexp.commands.run import preflight
    from ipuexp.sweeps.optuna_space import directions, objectives_of
    from ipuexp.sweeps.optuna_tell import own_jobs

    cfg = preflight(["hydra/sweeper=optuna", "+recipe=bert_base"])
    sweeper = cfg.hydra.sweeper
    target = "hydra_plugins.ipuexp.optuna_sweeper.OptunaSweeper"
    assert sweeper._target_ == target and own_jobs(cfg)
    assert sweeper.objectives is None and sweeper.max_failure_rate is None  # the study picks them
    assert objectives_of(sweeper.objectives, own=True) == ["throughput_samples_per_s"]
    assert directions(["throughput_samples_per_s"], sweeper.direction) == ["maximize"]
    assert directions(["throughput_samples_per_s", "peak_tile_memory_bytes"], None) == ["maximize", "minimize"]
    assert directions(["step_time_s"], "maximize") == ["maximize"]
    found = {f"{p.__module__}.{p.__name__}" for p in Plugins.instance().discover(Sweeper)}
    assert target in found


def _study_trials(db: Path, name: str) -> list:
    import optuna

    return optuna.load_study(study_name=name, storage=f"sqlite:///{db}").trials


@pytest.mark.slow
def test_a_stored_study_resumes(tmp_path: Path) -> None:
    """A study in a database: a rerun loads it, runs only the trials ``n_trials`` still lacks (job folders numbered
    as the trials), its sampler does not propose the earlier run's points again, and the summary names the study's
    best even when an earlier run found it. Another search space under the same name is refused on one line."""
    from omegaconf import OmegaConf

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MLFLOW_TRACKING_URI", None)
    base = [sys.executable, "-m", "ipuexp", "-m", "hydra/sweeper=optuna", "+recipe=bert_base",
            "hydra.sweeper.sampler.seed=0", "hydra.sweeper.storage=sqlite:///study.db", "tracking.enabled=false",
            "data.micro_batch_size=choice(16,32,64)", "options.available_memory_proportion=interval(0.1,0.4)"]
    first = subprocess.run(base + ["hydra.sweeper.n_trials=3", "hydra.sweep.dir=one"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Study name: bert_base" in first.stdout + first.stderr  # the experiment's name: a rerun finds it
    second = subprocess.run(base + ["hydra.sweeper.n_trials=5", "hydra.sweep.dir=two"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    out = second.stdout + second.stderr
    assert "Resumed: 3 of hydra.sweeper.n_trials=5 trials finished before; 2 to run" in out
    assert sorted(p.name for p in (tmp_path / "two").glob("[0-9]*")) == ["3", "4"]
    trials = _study_trials(tmp_path / "study.db", "bert_base")
    assert len(trials) == 5 and all(t.state.is_finished() for t in trials)
    points = [tuple(sorted(t.params.items())) for t in trials]
    assert len(set(points)) == 5  # the resumed sampler moved on
    results = OmegaConf.to_container(OmegaConf.load(tmp_path / "two" / "optimization_results.yaml"))
    complete = [t for t in trials if t.value is not None]
    best = max(complete, key=lambda t: t.value)
    assert results["best_trial"] == best.number and results["best_value"] == best.value
    flat = " ".join(out.split())
    if best.number < 3:
        assert f"Best of the whole study: trial #{best.number}, from an earlier run:" in flat
    else:
        assert f"Best fitting point: #{best.number} " in flat and "the study's best" in flat
    # Nothing left to run: the study's best again, no job.
    third = subprocess.run(base + ["hydra.sweeper.n_trials=5", "hydra.sweep.dir=three"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=600)
    assert third.returncode == 0 and "nothing to run (a larger n_trials extends it)" in third.stdout + third.stderr
    assert not list((tmp_path / "three").glob("[0-9]*"))
    # The same name with another search space: refused, the stored study untouched.
    other = subprocess.run(base[:-1] + ["hydra.sweeper.n_trials=6"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=600)
    assert other.returncode == 2
    assert other.stderr.strip() == ("ipuexp: config error: hydra.sweeper.study_name='bert_base' is invalid: its "
                                    "stored study has another search space; allowed: the same sweep, or a new "
                                    "study_name for this one")
    assert len(_study_trials(tmp_path / "study.db", "bert_base")) == 5


@pytest.mark.slow
def test_a_multi_objective_study(tmp_path: Path) -> None:
    """Throughput up and the fullest tile down: the results file holds the Pareto front, each trial's values the
    run's metrics, and the summary names the front."""
    from omegaconf import OmegaConf

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MLFLOW_TRACKING_URI", None)
    args = [sys.executable, "-m", "ipuexp", "-m", "hydra/sweeper=optuna", "hydra/sweeper/sampler=nsgaii",
            "hydra.sweeper.sampler.seed=1", "+recipe=bert_base", "hydra.sweeper.n_trials=8", "tracking.enabled=false",
            "hydra.sweeper.objectives=[throughput_samples_per_s,peak_tile_memory_bytes]",
            "data.micro_batch_size=choice(8,16,32,64)", "hydra.sweep.dir=sweep"]
    proc = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = OmegaConf.to_container(OmegaConf.load(tmp_path / "sweep" / "optimization_results.yaml"))
    assert results["directions"] == ["maximize", "minimize"]
    front = results["solutions"]
    assert front
    import json

    for solution in front:
        job = json.loads((tmp_path / "sweep" / str(solution["trial"]) / "result.json").read_text())
        tile = max(ipu["max_tile_bytes"] for ipu in job["memory"]["ipus"])
        assert solution["values"] == [job["throughput"]["samples_per_s"], tile]
    # No point of the front is beaten on both: the fastest has the fullest tile.
    values = sorted(s["values"] for s in front)
    assert all(a[1] <= b[1] for a, b in zip(values, values[1:]))
    flat = " ".join(proc.stdout.split())
    points = len({tuple(s["values"]) for s in front})  # trials of the same values are one point of the front
    said = f" at {points} points, " if points < len(front) else ", "
    assert f"Pareto front of the study (throughput_samples_per_s up, peak_tile_memory_bytes down): {len(front)} " \
           f"trials{said}" in flat


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["tpe", "grid"])
def test_a_study_whose_trials_all_fail_ends_on_one_line(tmp_path, sampler):
    # With the grid sampler the last trial of the grid fails too: the sweep still reaches the study's end.
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("HYDRA_FULL_ERROR", None)
    args = [sys.executable, "-m", "ipuexp", "-m", "hydra/sweeper=optuna", f"hydra/sweeper/sampler={sampler}",
            "hydra/launcher=basic", "+recipe=bert_base", "hydra.sweeper.n_trials=2", "hydra.sweeper.n_jobs=2",
            "data.micro_batch_size=choice(64,128)", "options.gradient_accumulation=512", "tracking.enabled=false",
            "hydra.sweep.dir=sweep"]
    proc = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("ipuexp: every trial of the study failed")
