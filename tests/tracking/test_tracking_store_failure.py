"""A tracking store that fails as a run ends: one line naming the store, what it said and where the run's result is
kept on disk; the job's own error, if it failed, stays the error raised."""
from __future__ import annotations

import json
import sqlite3

import pytest

from ipuexp.tracking import JobTracking, track_job
from ipuexp.tracking.runs import StoreFailed, TrackedRun


def _broken_flush(self):
    raise sqlite3.OperationalError("unable to open database file")


def test_a_store_failing_at_the_end_is_one_line_naming_the_result_kept(make_cfg, result, db_uri, tmp_path,
                                                                       monkeypatch):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"throughput": 1000.0}))
    result.artifacts["result"] = str(path)
    monkeypatch.setattr(TrackedRun, "flush", _broken_flush)
    with pytest.raises(StoreFailed) as err:
        with track_job(JobTracking.of(make_cfg())) as run:
            run.log_result(result)
    text = str(err.value)
    assert "\n" not in text and text.startswith("tracking.uri=")
    assert "unable to open database file" in text and f"the run's result is kept in {path}" in text
    assert json.loads(path.read_text()) == {"throughput": 1000.0}


def test_the_jobs_own_error_wins_over_the_stores(make_cfg, db_uri, monkeypatch, caplog):
    monkeypatch.setattr(TrackedRun, "flush", _broken_flush)
    with pytest.raises(ValueError, match="the job's own"):
        with track_job(JobTracking.of(make_cfg())):
            raise ValueError("the job's own error")
    assert any("the tracking store failed" in r.getMessage() for r in caplog.records)


def test_a_store_failing_as_the_run_starts_is_one_line(make_cfg, db_uri, monkeypatch):
    from ipuexp.tracking import runs

    def unreachable(uri):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(runs, "client", unreachable)
    with pytest.raises(StoreFailed) as err:
        with track_job(JobTracking.of(make_cfg())):
            raise AssertionError("the job must not start without its run")
    assert "failed as the run started (unable to open database file); nothing was computed yet" in str(err.value)


def test_an_error_that_is_not_the_stores_is_not_called_one(make_cfg, db_uri, monkeypatch):
    from ipuexp.tracking import runs

    def broken(uri):
        raise KeyError("a bug, not the store")

    monkeypatch.setattr(runs, "client", broken)
    with pytest.raises(KeyError):
        with track_job(JobTracking.of(make_cfg())):
            pass


def test_a_store_failing_when_asked_what_finished_is_one_line(make_cfg, db_uri, monkeypatch):
    from ipuexp.tracking import resume

    def unreachable(uri):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(resume, "client", unreachable)
    with pytest.raises(StoreFailed, match="failed as the run started"):
        JobTracking.of(make_cfg("tracking.skip_completed=true")).skip
