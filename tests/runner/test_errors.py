"""A failed job's error as the driver gets it: one line, and an instance of the type the task raised, also after a
trip through pickle (a Ray worker's result)."""
from __future__ import annotations

import pickle

import pytest
from hydra.errors import CompactHydraException

from ipuexp.runner.errors import JobFailedError, job_error


class TwoArgs(Exception):
    def __init__(self, a: int, b: int):
        super().__init__(a, b)


@pytest.mark.parametrize("exc", [ZeroDivisionError("division by zero"), KeyError("k"), FileNotFoundError(2, "gone"),
                                 TwoArgs(1, 2)], ids=lambda e: type(e).__name__)
def test_a_job_error_is_the_tasks_own_type_and_one_line(exc: Exception) -> None:
    err = job_error(exc, f"{type(exc).__name__}: one line", "Traceback ...", "job.log")
    for e in (err, pickle.loads(pickle.dumps(err))):
        assert isinstance(e, type(exc)) and isinstance(e, JobFailedError) and isinstance(e, CompactHydraException)
        assert str(e) == f"{type(exc).__name__}: one line" and e.error_type == type(exc).__name__
        assert (e.remote_traceback, e.log_file) == ("Traceback ...", "job.log")
    assert type(job_error(exc, "again")) is type(err)  # one class per type


def test_what_is_no_exception_of_a_task_stays_a_plain_job_failed_error() -> None:
    err = job_error(KeyboardInterrupt(), "KeyboardInterrupt")
    assert type(err) is JobFailedError and str(err) == "KeyboardInterrupt"
