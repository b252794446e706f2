"""``python -m ipuexp`` on input it cannot run: one line naming the key and the value as typed, exit code 2, no
traceback, and nothing written (no run folder, no store)."""
from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from tests.test_cli import run_cli


def _one_line(proc, *parts: str) -> str:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[0].startswith("ipuexp: config error: ")
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def test_an_override_hydra_cannot_parse_is_named_as_typed(tmp_path):
    proc = run_cli("+recipe=bert_base", "options.gradient_accumulation=[1,2", cwd=tmp_path)
    _one_line(proc, "options.gradient_accumulation='[1,2' is invalid", "override grammar")
    proc = run_cli("-m", "+recipe=bert_base", "options.device_iterations=(1", cwd=tmp_path)
    _one_line(proc, "options.device_iterations='(1' is invalid")
    proc = run_cli("+recipe=bert_base", "=5", cwd=tmp_path)
    _one_line(proc, "override='=5' is invalid", "a key before '='")
    # A composition error whose message names no key: the override that brings it, as typed.
    proc = run_cli("-m", "+recipe=bert_base", "options.io.num_io_tiles=32",
                   'hydra.sweeper.params.options.gradient_accumulation="range(4,8)"', cwd=tmp_path)
    line = _one_line(proc, "hydra.sweeper.params.options.gradient_accumulation='\"range(4,8)\"' is invalid")
    assert "?=" not in line
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("sweep,allowed", [("range(1,5,0)", "a sweep Hydra can list"),
                                           ("glob(*)", "a glob() matching options of a config group")])
def test_a_sweep_hydra_cannot_list_is_one_line(tmp_path, sweep, allowed):
    proc = run_cli("-m", "+recipe=bert_base", f"options.gradient_accumulation={sweep}", cwd=tmp_path)
    _one_line(proc, f"options.gradient_accumulation='{sweep}' is invalid", allowed)


def test_an_empty_sweep_range_is_one_line(tmp_path):
    proc = run_cli("-m", "+recipe=bert_base", "options.gradient_accumulation=range(4,4)", cwd=tmp_path)
    _one_line(proc, "options.gradient_accumulation='range(4,4)' is invalid", "at least one value")
    proc = run_cli("+recipe=bert_base", "options.gradient_accumulation=range(4,8)", cwd=tmp_path)
    _one_line(proc, "options.gradient_accumulation='range(4,8)'", "--multirun")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("key", ["hydra.run.dir", "hydra.sweep.dir"])
def test_an_output_folder_that_cannot_be_written_is_one_line(tmp_path, key):
    (tmp_path / "a_file").write_text("")
    multirun = ["-m"] if key == "hydra.sweep.dir" else []
    proc = run_cli(*multirun, "+recipe=bert_base", f"{key}={tmp_path / 'a_file' / 'out'}", cwd=tmp_path)
    _one_line(proc, f"{key}='{tmp_path / 'a_file' / 'out'}' is invalid", "not a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_a_tracking_file_that_is_not_a_database_is_one_line(tmp_path):
    (tmp_path / "broken.db").write_bytes(b"not a database at all, but long enough")
    proc = run_cli("+recipe=bert_base", "tracking.uri=sqlite:///broken.db", "hydra.run.dir=run", cwd=tmp_path)
    _one_line(proc, "tracking.uri='sqlite:///broken.db' is invalid", "not an SQLite database")
    assert not (tmp_path / "run").exists()


def test_a_tracking_server_that_does_not_answer_is_one_line_within_its_timeout(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted = []
    threading.Thread(target=lambda: accepted.extend(server.accept() for _ in range(1)), daemon=True).start()
    port = server.getsockname()[1]
    try:
        start = time.monotonic()
        proc = run_cli("+recipe=bert_base", f"tracking.uri=http://127.0.0.1:{port}", "tracking.timeout_s=2",
                       "hydra.run.dir=run", cwd=tmp_path)
        waited = time.monotonic() - start
    finally:
        server.close()
    _one_line(proc, f"tracking.uri='http://127.0.0.1:{port}' is invalid", "did not answer within 2 s")
    assert accepted, "the probe never reached the server"
    assert waited < 60  # MLflow's own retries wait minutes
    assert not (tmp_path / "run").exists()


def test_tracking_timeout_must_be_positive(tmp_path):
    proc = run_cli("+recipe=bert_base", "tracking.timeout_s=0", cwd=tmp_path)
    _one_line(proc, "tracking.timeout_s=0", "a number > 0")


STORE_FAILS_AT_THE_END = """
import sqlite3, sys
from ipuexp.tracking import runs

def flush(self):
    raise sqlite3.OperationalError("disk I/O error")

runs.TrackedRun.flush = flush
from ipuexp.commands.run import main
main(sys.argv[1:])
"""


def test_a_store_failing_as_the_run_ends_is_one_line_and_keeps_the_result(tmp_path):
    import os
    import subprocess
    import sys

    from tests.test_cli import ROOT

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run([sys.executable, "-c", STORE_FAILS_AT_THE_END, "+recipe=bert_base", "hydra.run.dir=run",
                           "report.charts=never"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if "mlflow.store.db.utils" not in ln]  # a new store's notes
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr[-2000:]
    kept = tmp_path / "run" / "result.json"
    assert lines[0].startswith("ipuexp: tracking.uri=") and "disk I/O error" in lines[0]
    assert f"the run's result is kept in {kept}" in lines[0] and kept.is_file()
