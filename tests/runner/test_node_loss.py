"""A sweep whose Ray cluster goes away mid-sweep fails as an ordinary failure.

A real ``python -m ipuexp -m`` sweep runs on a one-node cluster of the test's own; its raylet is killed once two
points have FINISHED runs in MLflow. The sweep must print the summary of what finished and one line on stderr,
exit non-zero, leave its parent run FAILED and no run RUNNING; the same command, run again on a new cluster at the
same address, must run only the points that did not finish.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import ray_head
from mlflow import MlflowClient

from ipuexp.tracking.store import retry
from ipuexp.tracking.sweep import LOST_TAG, PARENT_TAG, RESUMES_TAG

pytestmark = [pytest.mark.slow, pytest.mark.stress]

PATIENCE_S = 900
"""The longest any step below is waited for: each wait ends on its event (runs FINISHED, the sweep's exit), so only
a sweep that hangs takes this long; a loaded machine only makes the events come later."""

SWEEP = ["+recipe=bert_base", "options.gradient_accumulation=64,128,256", "options.io.num_io_tiles=0,32,64,128"]
POINTS = 12
EXPERIMENT = "node_loss"


def test_lost_cluster_is_reported_recorded_and_resumed(tmp_path: Path, empty_store: Path) -> None:
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    # Short (socket paths are limited to 107 bytes) and the cluster's alone, so its processes can be found.
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    env = _env(tmp_path)
    try:
        port = ray_head.free_base_port()
        head = ray_head.start_head(ray_tmp, port, env)
        command = [sys.executable, "-m", "ipuexp", "-m", *SWEEP, f"runner.ray.address={head}",
                   "tracking.uri=sqlite:///mlflow.db", f"tracking.experiment={EXPERIMENT}"]
        client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")

        sweep = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=open(tmp_path / "out1", "w"),
                                 stderr=open(tmp_path / "err1", "w"), start_new_session=True)
        try:
            deadline = time.monotonic() + PATIENCE_S
            while len(_runs(client, "FINISHED")[1]) < 2:
                assert sweep.poll() is None, "the sweep ended before its cluster was lost:\n" + _read(tmp_path, 1)
                assert time.monotonic() < deadline, _read(tmp_path, 1)
                time.sleep(0.2)
            os.kill(ray_head.raylet_pid(ray_tmp), signal.SIGKILL)
            code = sweep.wait(timeout=PATIENCE_S)
        finally:
            _end(sweep)
        _check_lost_sweep(code, tmp_path, client, head)

        ray_head.stop(ray_tmp)  # what is left of the cluster; a new one takes its address
        assert ray_head.start_head(ray_tmp, port, env) == head
        again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PATIENCE_S)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr
        _check_resumed_sweep(again.stdout, client)
    finally:
        ray_head.stop(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _check_lost_sweep(code: int, tmp_path: Path, client: MlflowClient, head: str) -> None:
    out, err = (tmp_path / "out1").read_text(), (tmp_path / "err1").read_text()
    print(out + err)  # shown with -s: what the user sees
    assert code == 1, out + err
    line = err.strip()
    match = re.fullmatch(rf"ipuexp: (Ray cluster at {re.escape(head)} was lost mid-sweep \(the raylet on "
                         rf"{re.escape(head.rsplit(':', 1)[0])} died\)): (\d+) of {POINTS} points finished, (\d+) "
                         r"did not; re-run the same command to run only the points that did not finish", line)
    assert match, err
    cause, finished = match.group(1), int(match.group(2))
    assert 2 <= finished < POINTS and finished + int(match.group(3)) == POINTS
    assert "Traceback" not in out + err
    assert f"cut short by the loss of its Ray cluster: {finished} done, 0 failed, 0 out of memory" in \
        " ".join(out.split())

    (parent,), children = _runs(client)
    assert parent.info.status == "FAILED" and parent.data.tags[LOST_TAG] == "true"
    assert parent.data.tags["error"] == cause
    assert not [r for r in [parent, *children] if r.info.status == "RUNNING"]
    done = [r for r in children if r.info.status == "FINISHED"]
    # A job may record its run FINISHED after the loss, before its worker noticed: never fewer than reported.
    assert len(done) >= finished
    for r in children:
        assert r.info.status == "FINISHED" or "was lost mid-sweep" in r.data.tags["error"], r.info


def _check_resumed_sweep(out: str, client: MlflowClient) -> None:
    assert "Resuming the sweep that lost its Ray cluster" in out
    (lost, resumed), children = _runs(client)
    assert resumed.info.status == "FINISHED" and resumed.data.tags[RESUMES_TAG] == lost.info.run_id
    before = {r.data.tags["config_hash"] for r in children
              if r.data.tags[PARENT_TAG] == lost.info.run_id and r.info.status == "FINISHED"}
    now = [r for r in children if r.data.tags[PARENT_TAG] == resumed.info.run_id]
    assert {r.info.status for r in now} == {"FINISHED"}
    ran = {r.data.tags["config_hash"] for r in now}
    assert len(ran) == len(now) == POINTS - len(before)  # only what had not finished, each once
    assert not ran & before
    # The summary breaks between words at the terminal's width: compare with the line breaks folded.
    assert f"{len(ran)} done, 0 failed, 0 out of memory, {len(before)} skipped" in " ".join(out.split())


def _runs(client: MlflowClient, status: str = "") -> Tuple[List[Any], List[Any]]:
    """The experiment's parent runs and child runs (of one status, if given), oldest first."""
    exp = retry(client.get_experiment_by_name, EXPERIMENT)
    if exp is None:
        return [], []
    runs = retry(client.search_runs, [exp.experiment_id], order_by=["attributes.start_time ASC"],
                 filter_string=f"attributes.status = '{status}'" if status else "")
    return ([r for r in runs if PARENT_TAG not in r.data.tags], [r for r in runs if PARENT_TAG in r.data.tags])


def _env(tmp_path: Path) -> Dict[str, str]:
    import ipuexp

    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI")}
    # The cluster's workers import the ipuexp under test, as the sweep does.
    root = str(Path(ipuexp.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    # A token that another local Ray left in ~/.ray turns token authentication on for `ray start`; this cluster
    # is the test's alone and needs none.
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0", IPUEXP_CACHE_DIR=str(tmp_path / "cache"))
    return env


def _read(tmp_path: Path, attempt: int) -> str:
    return (tmp_path / f"out{attempt}").read_text()[-3000:] + (tmp_path / f"err{attempt}").read_text()


def _end(proc: subprocess.Popen) -> None:
    """Kill the sweep if the test left it running (its Ray driver process stops when the sweep is gone)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
