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


def _tags(db: Path, key: str) -> List[str]:
    con = sqlite3.connect(db)
    try:
        return [v for (v,) in con.execute("SELECT value FROM tags WHERE key = ?", (key,))]
    finally:
        con.close()


SLOW_STORE = """
import sys, time
from ipuexp.tracking import recorder_loop

real = recorder_loop.record_job


def slow(record, started):
    time.sleep(0.5)  # a store on a slow disk: the recorder falls behind the jobs
    return real(record, started)


recorder_loop.record_job = slow
from ipuexp.commands.run import main
main(sys.argv[1:])
"""


def test_every_point_a_killed_sweep_reported_done_is_in_mlflow(tmp_path):
    """The progress line of a point comes once its run is written, so killing the whole command (its recorder with
    it, as a container's end does) after that line loses no point it reported done."""
    import re

    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.Popen([sys.executable, "-c", SLOW_STORE, "-m", "+recipe=bert_base",
                             "options.gradient_accumulation=128,256,512,1024", "options.device_iterations=1,2,4",
                             "report.charts=never", "hydra.sweep.dir=sweep"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    done = []
    assert proc.stdout is not None
    for line in proc.stdout:
        match = re.search(r"#\d+ done, .*\((.*)\)$", line.strip())
        if match:
            done.append(match.group(1))
        if len(done) == 3:
            os.killpg(proc.pid, signal.SIGKILL)
            break
    proc.wait()
    assert len(done) == 3
    deadline = time.monotonic() + 60
    while _session(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    recorded = _tags(tmp_path / "mlflow.db", "overrides")
    for overrides in done:
        assert any(all(o in tag for o in overrides.split()) for tag in recorded), (overrides, recorded)
