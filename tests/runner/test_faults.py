"""A job that raises, rejects its configuration or kills its worker fails alone; the sweep finishes the rest."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra.core.utils import JobStatus

from ipuexp.runner.errors import JobFailedError

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("own_ray")]


def test_failing_jobs_fail_alone(app: Path, tmp_path: Path, capsys: pytest.CaptureFixture, light_ray, launch) -> None:
    def task(cfg):
        if cfg.a == 2:
            raise ZeroDivisionError("injected failure")
        if cfg.a == 3:
            from ipuexp.config.errors import ConfigError

            raise ConfigError("options.io.num_io_tiles", 31, "allowed: 0, or an even number in [32, 192]")
        if cfg.a == 4:
            os._exit(7)  # the worker process dies: Ray re-runs the job once, then reports it
        return {"a": cfg.a, "pid": os.getpid()}

    jobs = [[f"a={i}"] for i in range(1, 7)]
    overrides = light_ray + ["hydra.launcher.max_retries=1", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    rets = launch(app, overrides, jobs, task)

    assert [r.overrides for r in rets] == jobs  # in submission order
    done = {r.overrides[0]: r.return_value["a"] for r in rets if r.status == JobStatus.COMPLETED}
    assert done == {"a=1": 1, "a=5": 5, "a=6": 6}
    failed = {r.overrides[0]: r._return_value for r in rets if r.status == JobStatus.FAILED}
    assert set(failed) == {"a=2", "a=3", "a=4"}
    assert all(isinstance(e, JobFailedError) for e in failed.values())
    assert str(failed["a=2"]) == "ZeroDivisionError: injected failure"
    assert "ZeroDivisionError" in failed["a=2"].remote_traceback and "task" in failed["a=2"].remote_traceback
    assert failed["a=2"].log_file and "injected failure" in Path(failed["a=2"].log_file).read_text()
    # A ConfigError keeps its one line, without the exception's type name.
    assert str(failed["a=3"]) == "options.io.num_io_tiles=31 is invalid: allowed: 0, or an even number in [32, 192]"
    assert failed["a=3"].config_error
    assert "worker process died (2 attempts" in str(failed["a=4"])
    # Job folders as the basic launcher makes them, failed jobs included.
    for i in range(6):
        assert (tmp_path / "sweep" / str(i) / ".hydra" / "overrides.yaml").is_file()

    out = " ".join(capsys.readouterr().out.split())  # lines break between words to fit the terminal
    assert "3 done, 3 failed, 0 out of memory" in out
    assert "injected failure" in out and "options.io.num_io_tiles=31 is invalid" in out
    assert "worker process died" in out


def test_worker_death_is_retried(app: Path, tmp_path: Path, light_ray, launch) -> None:
    marker = tmp_path / "died-once"

    def task(cfg):
        if cfg.a == 1 and not marker.exists():
            marker.touch()
            os._exit(9)  # first attempt only: Ray's retry runs the job again in a fresh worker
        return cfg.a

    overrides = light_ray + ["hydra.launcher.max_retries=1", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    rets = launch(app, overrides, [["a=1"], ["a=2"]], task)
    assert [r.status for r in rets] == [JobStatus.COMPLETED, JobStatus.COMPLETED]
    assert [r.return_value for r in rets] == [1, 2]
    assert marker.exists()


def test_sweeper_reports_first_failure_after_all_jobs(app: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
                                                       light_ray, multirun) -> None:
    """Through Hydra's sweeper: every job runs, then the sweep fails with the failed job's one line."""
    def task(cfg):
        if cfg.a == 1:
            raise RuntimeError("first point is broken")
        return cfg.a * 10

    with pytest.raises(JobFailedError, match="RuntimeError: first point is broken"):
        multirun(app, light_ray + ["a=1,2,3", f"hydra.sweep.dir={tmp_path / 'sweep'}"], task)
    out = " ".join(capsys.readouterr().out.split())  # lines break between words to fit the terminal
    assert "2 done, 1 failed, 0 out of memory" in out
    for i in (1, 2):
        assert (tmp_path / "sweep" / str(i) / ".hydra" / "config.yaml").is_file()


def test_bad_override_fails_its_job_only(app: Path, tmp_path: Path, light_ray, launch) -> None:
    rets = launch(app, light_ray + [f"hydra.sweep.dir={tmp_path / 'sweep'}"], [["a=1"], ["nope.b=1"]],
                  lambda cfg: cfg.a)
    assert rets[0].status == JobStatus.COMPLETED and rets[0].return_value == 1
    assert rets[1].status == JobStatus.FAILED
    assert "nope" in str(rets[1]._return_value)
