"""A job's tracking asked once: its store, experiment, identity, sweep and resume in one object the job reads."""
from __future__ import annotations

from ipuexp.tracking import JobTracking, track_job
from ipuexp.tracking.identity import config_hash


def test_one_object_says_where_the_run_goes_and_what_it_is(make_cfg, db_uri):
    cfg = make_cfg("options.gradient_accumulation=8")
    job = JobTracking.of(cfg)
    assert job.enabled and job.uri == db_uri and job.experiment == "test" and job.sweep is None
    assert job.config_hash == config_hash(cfg) and job.data["options"]["gradient_accumulation"] == 8
    assert not job.skip


def test_resume_asks_the_store_once_per_job(make_cfg, make_result, monkeypatch):
    from ipuexp.tracking import resume

    cfg = make_cfg("tracking.skip_completed=true", "options.gradient_accumulation=8")
    with track_job(JobTracking.of(cfg)) as run:
        run.log_result(make_result())
    asked = []
    real = resume.completed_run
    monkeypatch.setattr(resume, "completed_run", lambda *a: asked.append(a) or real(*a))
    job = JobTracking.of(cfg)
    assert job.skip and job.completed_run().info.run_id == run.run_id
    assert job.completed_run() is job.completed_run()
    assert len(asked) == 1


def test_a_job_without_tracking_asks_nothing(make_cfg, monkeypatch):
    from ipuexp.tracking import job as job_module

    monkeypatch.setattr(job_module, "resolved", lambda cfg: (_ for _ in ()).throw(AssertionError("resolved")))
    job = JobTracking.of(make_cfg("tracking.enabled=false", "tracking.skip_completed=true"))
    assert not job.enabled and not job.skip and job.completed_run() is None
