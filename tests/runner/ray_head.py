"""A private one-node Ray cluster for tests: ``ray start --head`` in a temporary folder of its own, on free
ports, and stopped by killing exactly its processes (``ray stop`` would stop every Ray of this user)."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Set

PORTS = 10
"""Ports from the head's base port: GCS, client server, dashboard, its agent (2), runtime env agent, metrics."""


def free_base_port() -> int:
    """A port with the next PORTS - 1 free too (anything may take one before Ray does; rarely)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("", 0))
            base = s.getsockname()[1]
        if base + PORTS < 65536 and all(_free(base + i) for i in range(PORTS)):
            return base
    raise RuntimeError("no block of free ports")


def _free(port: int, reuse: bool = False) -> bool:
    """Nothing bound to ``port``; with ``reuse``, nothing listening (closed connections waiting out TIME_WAIT do not
    keep Ray from binding, which it does with SO_REUSEADDR)."""
    with socket.socket() as s:
        if reuse:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False


def start_head(temp_dir: str, port: int, env: Dict[str, str], num_cpus: int = 1) -> str:
    """Start the head node; return its GCS address (``HOST:PORT``)."""
    ray = str(Path(sys.executable).with_name("ray"))
    cmd = [ray, "start", "--head", f"--temp-dir={temp_dir}", f"--port={port}", f"--num-cpus={num_cpus}",
           "--num-gpus=0", "--object-store-memory=80000000", "--include-dashboard=false", "--disable-usage-stats",
           f"--ray-client-server-port={port + 1}", f"--dashboard-port={port + 2}",
           f"--dashboard-agent-listen-port={port + 3}", f"--dashboard-agent-grpc-port={port + 4}",
           f"--runtime-env-agent-port={port + 5}", f"--metrics-export-port={port + 6}"]
    # A cluster stopped just before may hold its ports a moment longer (longer on a loaded machine): wait for them.
    deadline = time.monotonic() + 300
    while not all(_free(port + i, reuse=True) for i in range(PORTS - 3)):
        assert time.monotonic() < deadline, f"ports from {port} still taken"
        time.sleep(0.5)
    # Its own session, so that nothing aimed at the test's process group reaches the cluster.
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, start_new_session=True)
    assert out.returncode == 0, out.stdout + out.stderr
    found = re.search(r"--address='([^']+)'", out.stdout + out.stderr)
    assert found, out.stdout + out.stderr
    return found.group(1)


def processes(temp_dir: str) -> Set[int]:
    """The cluster's processes: those naming its folder, and their descendants (workers rename themselves)."""
    parents: Dict[int, int] = {}
    roots: Set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
        if temp_dir in cmdline:
            roots.add(int(entry.name))
    return roots | descendants(roots, parents)


def descendants(roots: Set[int], parents: Dict[int, int]) -> Set[int]:
    found: Set[int] = set()
    frontier: List[int] = list(roots)
    while frontier:
        pid = frontier.pop()
        children = [c for c, p in parents.items() if p == pid and c not in found]
        found.update(children)
        frontier.extend(children)
    return found


def raylet_pid(temp_dir: str) -> int:
    for pid in processes(temp_dir):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"/raylet"):
                return pid
        except OSError:
            continue
    raise AssertionError(f"no raylet of the cluster in {temp_dir}")


def kill_all(pids: Set[int], wait_s: float = 300.0) -> None:
    """SIGKILL ``pids`` and wait until they are gone."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait_s
    while any(Path(f"/proc/{pid}").exists() and not _zombie(pid) for pid in pids):
        assert time.monotonic() < deadline, f"processes left: {sorted(pids)}"
        time.sleep(0.1)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def stop(temp_dir: str) -> None:
    """Stop the cluster in ``temp_dir`` (killing its processes: it holds no data worth a graceful stop)."""
    kill_all(processes(temp_dir))
