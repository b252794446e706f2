"""What the study is told of each trial's job: ipuexp's jobs by their run metrics, another Hydra app by the value or
tuple its task function returns (as hydra-optuna-sweeper reads it); failed jobs fail their trials, and more failures
than ``max_failure_rate`` stop the study with the first failed job's own error."""
from __future__ import annotations

import optuna
import pytest
from hydra.core.utils import JobReturn, JobStatus
from optuna.trial import TrialState

from ipuexp.result import Objective
from ipuexp.runner.errors import DoesNotFit, SweepReturn
from ipuexp.sweeps import optuna_tell

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _job(value, ok: bool = True) -> JobReturn:
    ret = JobReturn(overrides=[], status=JobStatus.COMPLETED if ok else JobStatus.FAILED)
    ret.return_value = value
    return ret


def test_objective_values_come_from_the_runs_metrics() -> None:
    job = Objective(100.0, None, {"throughput_samples_per_s": 100.0, "peak_tile_memory_bytes": 4096.0})
    assert optuna_tell._values(job, ["peak_tile_memory_bytes", "throughput_samples_per_s"], 2) == [4096.0, 100.0]
    assert optuna_tell._values(7.5, ["throughput_samples_per_s"], 1) == [7.5]  # another task function's float
    with pytest.raises(ValueError, match="the run has no mfu"):
        optuna_tell._values(job, ["mfu"], 1)


def test_another_apps_values_are_what_it_returns() -> None:
    assert optuna_tell._values(2, [], 1) == [2.0]
    assert optuna_tell._values((1, 2.5), [], 2) == [1.0, 2.5]
    with pytest.raises(ValueError, match="^Return value must be float-castable. Got 'x'.$"):
        optuna_tell._values("x", [], 1)
    with pytest.raises(ValueError, match="^Return value must be float-castable"):
        optuna_tell._values((1, 2), [], 1)  # a tuple needs one direction per value
    with pytest.raises(ValueError, match="Expect 2, but actually 3"):
        optuna_tell._values((1, 2, 3), [], 2)


def test_failed_jobs_fail_their_trials_and_the_rate_stops_the_study() -> None:
    study = optuna.create_study(directions=["maximize"])
    trials = [study.ask() for _ in range(2)]
    oom = SweepReturn(overrides=[], status=JobStatus.FAILED)
    oom.return_value = DoesNotFit("does not fit in IPU memory")
    returns = [_job(Objective(5.0, None, {"throughput_samples_per_s": 5.0})), oom]
    optuna_tell.tell(study, trials, returns, ["throughput_samples_per_s"], max_failure_rate=1.0)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.FAIL]
    more = [study.ask() for _ in range(2)]
    with pytest.raises(DoesNotFit):
        optuna_tell.tell(study, more, [oom, oom], ["throughput_samples_per_s"], max_failure_rate=0.5)


def test_a_value_that_is_no_number_fails_its_trial_and_the_study_goes_on() -> None:
    """As hydra-optuna-sweeper: over the rate, only a job that raised stops the study."""
    study = optuna.create_study()
    trials = [study.ask() for _ in range(2)]
    optuna_tell.tell(study, trials, [_job("x"), _job(1.0)], [], max_failure_rate=0.0)
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.COMPLETE]


def test_a_grid_whose_last_trial_fails_is_told_without_error() -> None:
    """Optuna's grid sampler asks the study to stop after the grid's last trial, which only ``optimize`` allows;
    the trial is recorded and the request ignored."""
    study = optuna.create_study(sampler=optuna.samplers.GridSampler({"x": [0, 1]}))
    for _ in range(2):
        trial = study.ask()
        trial.suggest_categorical("x", [0, 1])
        optuna_tell.told(study, trial, state=TrialState.FAIL)
    assert [t.state for t in study.trials] == [TrialState.FAIL] * 2


def test_a_finished_job_whose_value_the_study_refuses_is_named() -> None:
    """The sweep's table lists such a job as failed, not done (``Tally.refuse``)."""
    study = optuna.create_study(directions=["minimize", "minimize"])
    trials = [study.ask() for _ in range(2)]
    refused = optuna_tell.tell(study, trials, [_job((1, 2)), _job(3.0)], [], max_failure_rate=1.0)
    assert refused == [(1, "Return value must be a list or tuple of float-castable values. Got '3.0'.")]
