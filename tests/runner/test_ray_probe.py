"""Ray's settings before a sweep starts: a ``RAY_AUTH_MODE`` Ray does not know, and an address where no cluster
answers, are each one line with exit code 2 within seconds, with no Ray process started and nothing written."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from tests.test_cli import ROOT

SWEEP = ["-m", "+recipe=bert_base", "options.gradient_accumulation=256,512", "tracking.enabled=false",
         "hydra.sweep.dir=sweep"]


def _sweep(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    environ.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", "ipuexp", *SWEEP, *args], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=120)


def _one_line(proc) -> str:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    return lines[0]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_auth_mode_ray_does_not_know_is_one_line(tmp_path):
    line = _one_line(_sweep(tmp_path, RAY_AUTH_MODE="tokn"))
    assert line == ("ipuexp: config error: RAY_AUTH_MODE='tokn' is invalid: allowed: disabled or token (Ray's token "
                    "authentication; unset: Ray's default)")
    assert not (tmp_path / "sweep").exists()


@pytest.mark.parametrize("where", ["env", "key"])
def test_a_ray_address_where_nothing_answers_is_one_line_within_seconds(tmp_path, where):
    port = _closed_port()
    start = time.monotonic()
    if where == "env":
        proc = _sweep(tmp_path, RAY_ADDRESS=f"127.0.0.1:{port}")
        key = "RAY_ADDRESS"
    else:
        proc = _sweep(tmp_path, f"runner.ray.address=ray://127.0.0.1:{port}", "runner.ray.connect_timeout_s=2")
        key = "runner.ray.address"
    line = _one_line(proc)
    assert time.monotonic() - start < 60
    assert line.startswith(f"ipuexp: config error: {key}=") and f"127.0.0.1:{port} cannot be reached" in line, line
    assert "allowed: the address of a running Ray cluster" in line and "runner.ray.connect_timeout_s=" in line
    assert not (tmp_path / "sweep").exists()


def test_the_probe_waits_no_longer_than_its_timeout(monkeypatch):
    from ipuexp.runner import ray_probe

    def slow(address, timeout):
        raise socket.timeout()

    monkeypatch.setattr(socket, "create_connection", slow)
    assert ray_probe._unanswered("10.0.0.1", 6379, 3.0) == "10.0.0.1:6379 did not answer within 3 s"


def test_a_functional_run_on_ray_instances_checks_ray_too(tmp_path):
    environ = dict(os.environ, PYTHONPATH=str(ROOT), RAY_ADDRESS=f"127.0.0.1:{_closed_port()}")
    proc = subprocess.run([sys.executable, "-m", "ipuexp", "+recipe=mnist_pipeline", "system=pod16",
                           "options.replication_factor=2", "options.num_instances=2", "tracking.enabled=false",
                           "hydra.run.dir=run"], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=120)
    assert _one_line(proc).startswith("ipuexp: config error: RAY_ADDRESS=")
    assert not (tmp_path / "run").exists()
