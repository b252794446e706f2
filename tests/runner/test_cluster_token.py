"""The README's cluster example on the Ray the install resolves (2.60): a head started with ``ray start --head`` on
a machine that holds ``~/.ray/auth_token`` (any local Ray since Ray 2.52 leaves one there) uses token authentication,
and a sweep joins it through Ray Client (``ray://HEAD:10001``) only with ``RAY_AUTH_MODE=token`` and the token; without
them it ends on one line that says so."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict

import pytest
import ray_head

from ipuexp.runner import cluster

TOKEN = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"


def _env(home: Path, tmp_path: Path) -> Dict[str, str]:
    import ipuexp

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "MLFLOW_"))}
    root = str(Path(ipuexp.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(HOME=str(home), RAY_USAGE_STATS_ENABLED="0", IPUEXP_CACHE_DIR=str(tmp_path / "cache"))
    return env


@pytest.mark.stress
@pytest.mark.slow
def test_sweep_joins_a_token_cluster_through_ray_client(tmp_path: Path) -> None:
    head_home = tmp_path / "head"
    (head_home / ".ray").mkdir(parents=True)
    (head_home / ".ray" / "auth_token").write_text(TOKEN)
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    try:
        port = ray_head.free_base_port()
        ray_head.start_head(ray_tmp, port, _env(head_home, tmp_path))
        client_home = tmp_path / "client"
        client_home.mkdir()
        env = _env(client_home, tmp_path)
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN)
        command = [sys.executable, "-m", "ipuexp", "-m", "+recipe=bert_large",
                   "options.gradient_accumulation=1024,2048", f"runner.ray.address=ray://127.0.0.1:{port + 1}",
                   "tracking.enabled=false"]
        out = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        assert "2 done, 0 failed" in out.stdout
    finally:
        ray_head.stop(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_a_cluster_that_cannot_be_joined_names_token_authentication(monkeypatch) -> None:
    import ray

    def refuse(**kwargs):
        raise ConnectionError("ray client connection timeout")

    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refuse)
    with pytest.raises(cluster.ClusterError) as err:
        cluster.connect(cluster.RaySettings(address="ray://10.0.0.5:10001"))
    message = str(err.value)
    assert "\n" not in message
    assert "RAY_AUTH_MODE=token" in message and "ray get-auth-token" in message


SERVER_FAILED = """Initialization failure from server:
Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/ray/util/client/server/proxier.py", line 772, in Datapath
    raise RuntimeError(
RuntimeError: Starting Ray client server failed. See ray_client_server_23001.err for detailed logs.
"""


ZOMBIE = """Initialization failure from server:
Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/psutil/_pslinux.py", line 1640, in cmdline
psutil.ZombieProcess: PID still exists but it's a zombie (pid=3653)
"""


def _client_server_failures(monkeypatch, failures: int, answer: str = SERVER_FAILED) -> list:
    """``ray.init`` that answers as a head whose proxy lost the first ``failures`` servers it started."""
    import ray

    calls: list = []

    def init(**kwargs):
        calls.append(kwargs["address"])
        if len(calls) <= failures:
            raise ConnectionAbortedError(answer)

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    monkeypatch.setattr(cluster, "_describe", lambda ray: "Ray cluster")
    return calls


@pytest.mark.parametrize("answer", [SERVER_FAILED, ZOMBIE], ids=["reported", "zombie"])
def test_a_client_server_that_failed_to_start_is_connected_again(monkeypatch, caplog, answer: str) -> None:
    calls = _client_server_failures(monkeypatch, failures=2, answer=answer)
    try:
        cluster.connect(cluster.RaySettings(address="ray://10.0.0.5:10001"))
    finally:
        monkeypatch.setattr(cluster, "_connected_here", False)
    assert calls == ["ray://10.0.0.5:10001"] * 3
    assert "(try 2 of 4); connecting again" in caplog.text


def test_a_client_server_that_never_starts_ends_on_one_line(monkeypatch) -> None:
    calls = _client_server_failures(monkeypatch, failures=cluster.CLIENT_ATTEMPTS)
    with pytest.raises(cluster.ClusterError) as err:
        cluster.connect(cluster.RaySettings(address="ray://10.0.0.5:10001"))
    assert len(calls) == cluster.CLIENT_ATTEMPTS
    message = str(err.value)
    assert "\n" not in message and "File" not in message
    assert "server: RuntimeError: Starting Ray client server failed. See ray_client_server_23001.err" in message


def test_other_failures_to_join_are_not_tried_again(monkeypatch) -> None:
    import ray

    calls: list = []

    def refuse(**kwargs):
        calls.append(1)
        raise ConnectionError("ray client connection timeout")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refuse)
    with pytest.raises(cluster.ClusterError):
        cluster.connect(cluster.RaySettings(address="ray://10.0.0.5:10001"))
    assert calls == [1]
