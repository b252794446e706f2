"""``kill -9`` of a tracked single run, at any moment: its helpers (the charts' processes, the warm worker) stop
within moments instead of writing into the dead run's folder, and the recorder still leaves the run in MLflow,
KILLED, even when the job had not started yet."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest

from tests.test_cli import ROOT

pytestmark = [pytest.mark.stress]


def _session(sid: int) -> List[int]:
    """The processes of session ``sid`` (the command and everything it forked)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(entry.name))
    return pids


def _folder_state(folder: Path) -> dict:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()} \
        if folder.exists() else {}


def _runs(db: Path) -> List[tuple]:
    if not db.exists():
        return []
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT status FROM runs").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="helpers end with their parent on Linux")
@pytest.mark.parametrize("moment", ["the run folder appears", "result.json is written"])
def test_a_killed_run_leaves_no_helper_writing_and_its_run_killed(tmp_path, moment):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.Popen([sys.executable, "-m", "ipuexp", "+recipe=bert_base", "hydra.run.dir=run"], cwd=tmp_path,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    run = tmp_path / "run"
    mark = run if moment == "the run folder appears" else run / "result.json"
    deadline = time.monotonic() + 300
    while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(1.5)
    state = _folder_state(run)
    time.sleep(3)
    assert _folder_state(run) == state  # nothing writes into the dead run's folder
    assert not [n for n in state if n.endswith(".tmp")], state
    deadline = time.monotonic() + 60
    while _session(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _session(proc.pid)
    # Killed once its result was written, the job may have sent its run already: FINISHED, its result whole.
    allowed = [[("KILLED",)]] + ([[("FINISHED",)]] if moment == "result.json is written" else [])
    assert _runs(tmp_path / "mlflow.db") in allowed
