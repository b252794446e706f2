"""Fixtures shared by the tracking and report tests: a fresh MLflow SQLite store per test; and ``--burn-cpu N``, N
processes that keep the CPUs busy for the whole session, as a user's machine is (``-m stress --burn-cpu 2`` runs the
tests that wait on other processes under that load)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List

import pytest


@pytest.fixture(scope="session")
def empty_store(tmp_path_factory) -> Path:
    """An MLflow SQLite store with its schema created once (the migrations take seconds)."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("store") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def db_uri(tmp_path: Path, empty_store: Path) -> str:
    """A copy of the empty store, this test's own."""
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--burn-cpu", type=int, default=0, metavar="N",
                     help="run N CPU-burning processes beside the tests for the whole session (a busy machine)")


@pytest.fixture(scope="session", autouse=True)
def cpu_burners(request: pytest.FixtureRequest) -> Iterator[List[subprocess.Popen]]:
    """``--burn-cpu N`` processes spinning at full speed; stopped (by their ids) when the session ends."""
    count = request.config.getoption("--burn-cpu")
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(max(0, count))]
    try:
        yield burners
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()
