import pytest

from ipuexp.tracking import JobTracking, track_job


def test_only_a_finished_run_of_the_same_configuration_counts(make_cfg, make_result):
    cfg = make_cfg("tracking.skip_completed=true", "options.gradient_accumulation=8")
    assert not JobTracking.of(cfg).skip  # no experiment yet
    with pytest.raises(RuntimeError):
        with track_job(JobTracking.of(cfg)):
            raise RuntimeError("crashed")
    assert not JobTracking.of(cfg).skip  # a FAILED run does not count
    with track_job(JobTracking.of(cfg)) as run:
        run.log_result(make_result(fits=False))  # out of memory is still an answer
    assert JobTracking.of(cfg).skip
    assert JobTracking.of(cfg).completed_run().info.run_id == run.run_id
    # another option value, or the same configuration recorded elsewhere, is not done
    assert not JobTracking.of(make_cfg("tracking.skip_completed=true", "options.gradient_accumulation=16")).skip
    assert not JobTracking.of(make_cfg("tracking.skip_completed=true", "options.gradient_accumulation=8",
                                          "tracking.experiment=other")).skip
    # where and how the job is recorded or scheduled does not change what it computes
    assert JobTracking.of(make_cfg("tracking.skip_completed=true", "options.gradient_accumulation=8",
                                      "runner.ray.num_cpus=1")).skip


def test_resume_is_opt_in(make_cfg, make_result):
    cfg = make_cfg("options.gradient_accumulation=8")
    with track_job(JobTracking.of(cfg)) as run:
        run.log_result(make_result())
    assert JobTracking.of(cfg).completed_run() is not None
    assert not JobTracking.of(cfg).skip  # tracking.skip_completed defaults to false
    assert not JobTracking.of(make_cfg("tracking.enabled=false", "tracking.skip_completed=true")).skip
