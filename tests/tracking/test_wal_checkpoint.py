"""The SQLite store runs in write-ahead-log mode; ``mlflow.db`` alone must still be the whole store whenever no
command runs: a run's end and a sweep's end checkpoint the log into it, and the next command checkpoints what a
killed one left in the log."""
from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys

from ipuexp.tracking.store import checkpoint
from tests.test_cli import run_cli

KILLED_WRITER = """
import os, sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.execute("PRAGMA journal_mode=WAL")
con.execute("PRAGMA wal_autocheckpoint=0")
con.execute("CREATE TABLE runs (run_uuid TEXT)")
con.execute("INSERT INTO runs VALUES ('r1')")
con.commit()
os._exit(0)  # as a killed command: its connection never closes, the log is never checkpointed
"""


def _runs_in_the_file_alone(db, tmp_path) -> int:
    copy = tmp_path / "copy" / "mlflow.db"
    copy.parent.mkdir(exist_ok=True)
    shutil.copyfile(db, copy)  # the file without its -wal, as a plain copy takes it
    con = sqlite3.connect(copy)
    try:
        return con.execute("SELECT count(*) FROM runs").fetchone()[0]
    except sqlite3.OperationalError:  # no such table: it is still in the log
        return 0
    finally:
        con.close()


def test_a_finished_run_is_in_the_database_file_alone(tmp_path):
    proc = run_cli("+recipe=mnist_pipeline", "engine.mode=analytic", "report.charts=never", "hydra.run.dir=run",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _runs_in_the_file_alone(tmp_path / "mlflow.db", tmp_path) == 1
    # The command closed its connections (and its recorder's) as it exited: SQLite removed the log files.
    assert not (tmp_path / "mlflow.db-wal").exists() and not (tmp_path / "mlflow.db-shm").exists()


def test_what_a_killed_command_left_in_the_log_is_checkpointed(tmp_path):
    db = tmp_path / "mlflow.db"
    subprocess.run([sys.executable, "-c", KILLED_WRITER, str(db)], check=True, timeout=60)
    assert (tmp_path / "mlflow.db-wal").stat().st_size > 0
    assert _runs_in_the_file_alone(db, tmp_path) == 0
    checkpoint(f"sqlite:///{db}", "TRUNCATE")  # as the next command opens the store
    assert _runs_in_the_file_alone(db, tmp_path) == 1
    assert not (tmp_path / "mlflow.db-wal").exists() or (tmp_path / "mlflow.db-wal").stat().st_size == 0


def test_the_next_command_opening_the_store_checkpoints_it(tmp_path, monkeypatch):
    from ipuexp.tracking import store

    db = tmp_path / "mlflow.db"
    seen = []
    monkeypatch.setattr(store, "checkpoint", lambda uri, mode="PASSIVE": seen.append((uri, mode)))
    monkeypatch.setattr(store, "_clients", {})
    store.client(f"sqlite:///{db}")
    assert seen[0] == (f"sqlite:///{db}", "TRUNCATE")


def test_a_finished_sweep_is_in_the_database_file_alone(tmp_path):
    proc = run_cli("-m", "+recipe=mnist_pipeline", "engine.mode=analytic", "options.gradient_accumulation=8,16",
                   "report.charts=never", "hydra.sweep.dir=sweep", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _runs_in_the_file_alone(tmp_path / "mlflow.db", tmp_path) == 3  # the parent and its two points
    assert not (tmp_path / "mlflow.db-wal").exists() and not (tmp_path / "mlflow.db-shm").exists()
