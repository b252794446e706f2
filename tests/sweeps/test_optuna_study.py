"""The Optuna study of ipuexp's sweeper, without Hydra: the search space from the override grammar, objective values
from a job's return, a stored study resumed, the grid sampler's stop, and the results file and summary lines."""
from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from hydra.core.utils import JobReturn, JobStatus
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from ipuexp.config.errors import ConfigError
from ipuexp.runner import summary
from ipuexp.sweeps import optuna_results, optuna_study
from ipuexp.sweeps.optuna_space import directions, grid, space

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_the_override_grammar_as_distributions() -> None:
    s = space(["data.micro_batch_size=choice(8,16)", "options.gradient_accumulation=range(256,1024,256)",
               "options.available_memory_proportion=interval(0.1,0.4)", "x=int(interval(1,8))",
               "y=tag(log, interval(0.001,1.0))", "z=range(0.5,2.0,0.5)", "+recipe=bert_base",
               "data.micro_batch_size=choice(4,8)", "tracking.enabled=false"])  # the later one wins (the command line after params)
    d = s.distributions
    assert d["data.micro_batch_size"] == CategoricalDistribution([4, 8])
    # hydra-optuna-sweeper's range: its stop included (Hydra's basic sweeper's excludes it)
    assert d["options.gradient_accumulation"] == IntDistribution(256, 1024, step=256)
    assert d["options.available_memory_proportion"] == FloatDistribution(0.1, 0.4)
    assert d["x"] == IntDistribution(1, 8)
    assert d["y"] == FloatDistribution(0.001, 1.0, log=True)
    assert d["z"] == FloatDistribution(0.5, 2.0, step=0.5)
    assert s.fixed == {"+recipe": "bert_base", "tracking.enabled": "false"}  # as written, not Python's False
    assert grid({k: d[k] for k in ("data.micro_batch_size", "options.gradient_accumulation")}) == {
        "data.micro_batch_size": [4, 8], "options.gradient_accumulation": [256, 512, 768]}  # as that plugin lists it
    with pytest.raises(ConfigError, match="under the grid sampler"):
        grid({"options.available_memory_proportion": d["options.available_memory_proportion"]})
    with pytest.raises(ConfigError, match="hydra.sweeper.direction"):
        directions(["throughput_samples_per_s", "step_time_s"], ["maximize"])


def test_a_stored_study_resumes_its_interrupted_trials(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    s = space(["x=choice(1,2,3)"])
    study = optuna.create_study(study_name="s", storage=storage, directions=["maximize"])
    assert optuna_study._resume(study, s, ["throughput_samples_per_s"], ["maximize"]) == 0
    done = study.ask()
    done.suggest_categorical("x", [1, 2, 3])
    study.tell(done, 1.0)
    cut = study.ask()  # a run interrupted here leaves the trial RUNNING
    cut.suggest_categorical("x", [1, 2, 3])
    again = optuna.load_study(study_name="s", storage=storage)
    assert optuna_study._resume(again, s, ["throughput_samples_per_s"], ["maximize"]) == 1
    states = [t.state for t in again.trials]
    assert states == [TrialState.COMPLETE, TrialState.FAIL, TrialState.WAITING]
    rerun = again.ask()  # queued to run again, at the same point
    assert rerun.suggest_categorical("x", [1, 2, 3]) == cut.params["x"]
    with pytest.raises(ConfigError, match="another search space"):
        optuna_study._resume(again, space(["x=choice(1,2)"]), ["throughput_samples_per_s"], ["maximize"])
    with pytest.raises(ConfigError, match="another objectives and directions"):
        optuna_study._resume(again, s, ["step_time_s"], ["minimize"])


def test_a_rerun_trials_job_reads_a_finished_run_instead_of_evaluating_again(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    s = space(["x=choice(1,2,3)", "y=7"])
    study = optuna.create_study(study_name="s", storage=storage, directions=["maximize"])
    optuna_study._resume(study, s, ["throughput_samples_per_s"], ["maximize"])
    fresh = study.ask()
    assert "tracking.skip_completed=true" not in optuna_study._overrides(fresh, s, None, None)
    again = optuna.load_study(study_name="s", storage=storage)  # the first run was killed with ``fresh`` RUNNING
    optuna_study._resume(again, s, ["throughput_samples_per_s"], ["maximize"])
    rerun = again.ask()
    assert rerun.user_attrs[optuna_study.RERUN_ATTR] == fresh.number
    overrides = optuna_study._overrides(rerun, s, None, None)
    assert f"x={fresh.params['x']}" in overrides and "y=7" in overrides
    assert "tracking.skip_completed=true" in overrides  # its job, if it finished, is not evaluated twice


def test_a_trial_whose_job_finished_before_it_was_told_is_told_not_run_again(tmp_path: Path) -> None:
    import json

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    s = space(["x=choice(1,2,3)"])
    study = optuna.create_study(study_name="s", storage=storage, directions=["maximize"])
    optuna_study._resume(study, s, ["throughput_samples_per_s"], ["maximize"])
    finished, cut = study.ask(), study.ask()  # the driver is killed with both RUNNING
    for trial, folder in ((finished, tmp_path / "0"), (cut, tmp_path / "1")):
        trial.suggest_categorical("x", [1, 2, 3])
        trial.set_user_attr(optuna_study.JOB_DIR_ATTR, str(folder))
        folder.mkdir()
    (tmp_path / "0" / optuna_study.OBJECTIVE_FILE).write_text(json.dumps(
        {"value": 1234.5, "metrics": {"throughput_samples_per_s": 1234.5, "step_time_s": 0.5}}))
    again = optuna.load_study(study_name="s", storage=storage)
    assert optuna_study._resume(again, s, ["throughput_samples_per_s"], ["maximize"]) == 1
    states = {t.number: (t.state, t.values) for t in again.trials}
    assert states[finished.number] == (TrialState.COMPLETE, [1234.5])  # told from its job's file
    assert states[cut.number][0] == TrialState.FAIL  # its job had not finished: queued to run again
    assert [t.user_attrs.get(optuna_study.RERUN_ATTR) for t in again.trials if t.state == TrialState.WAITING] == \
        [cut.number]


def _outcome(idx: int, overrides, tput: float) -> summary.Outcome:
    ret = JobReturn(overrides=overrides, status=JobStatus.COMPLETED)
    ret.return_value = {"throughput": {"samples_per_s": tput}}
    return summary.classify(idx, ret)


def test_results_name_the_studys_best(tmp_path: Path) -> None:
    study = optuna.create_study(directions=["maximize"])
    for x, value in ((1, 10.0), (2, 30.0), (3, 20.0)):
        study.enqueue_trial({"x": x})
        trial = study.ask()
        trial.suggest_categorical("x", [1, 2, 3])
        study.tell(trial, value)
    path = tmp_path / "optimization_results.yaml"
    ran = [_outcome(1, ["x=2"], 30.0), _outcome(2, ["x=3"], 20.0)]
    top, source, notes = optuna_results.write(study, ["throughput_samples_per_s"], path, ran)
    assert top is ran[0] and notes == [] and source == f"the study's best, as in {path}"
    text = path.read_text()
    assert "best_trial: 1" in text and "best_value: 30.0" in text and "best_params:\n  x: 2" in text
    # This run's jobs are trials 2 and 3 of a longer study: the best is an earlier run's, said as such.
    top, source, notes = optuna_results.write(study, ["throughput_samples_per_s"], path,
                                              [_outcome(2, ["x=3"], 20.0)])
    assert top is None and source == "the fastest of this run"
    assert notes == [f"Best of the whole study: trial #1, from an earlier run: x=2 (30.0 samples/s; as in {path})"]
    empty = optuna.create_study()
    assert optuna_results.write(empty, ["throughput_samples_per_s"], tmp_path / "none.yaml", []) == (None, "", [])
    assert not (tmp_path / "none.yaml").exists()
    with pytest.raises(optuna_results.NoTrialCompleted):
        optuna_results.check_completed(empty)
