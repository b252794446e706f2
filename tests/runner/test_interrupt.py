"""Ctrl-C during a sweep: unfinished jobs are cancelled, Ray is shut down, the process ends promptly."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.stress]

NEVER_S = 3600
"""How long the jobs after the first sleep: far longer than any wait below, so a sweep that ends at all after Ctrl-C
cancelled them (nothing is timed against a guess of how fast a loaded machine is)."""

APP = '''
import time
import hydra

@hydra.main(version_base=None, config_path=None, config_name=None)
def main(cfg):
    time.sleep(0.5 if cfg.a == 1 else NEVER_S)
    return cfg.a

if __name__ == "__main__":
    main()
'''


def _ray_processes(tmp_root: str) -> list:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if tmp_root in line]


def test_ctrl_c_stops_sweep_and_ray(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP.replace("NEVER_S", str(NEVER_S)))
    # Ray's own folder, short (socket paths are limited to 107 bytes) and ours alone, so its processes can be found.
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    try:
        _interrupt_sweep(tmp_path, ray_tmp)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _interrupt_sweep(tmp_path: Path, ray_tmp: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(RAY_TMPDIR=ray_tmp, RAY_USAGE_STATS_ENABLED="0")
    cmd = [sys.executable, "app.py", "-m", "hydra/launcher=ray", "hydra.launcher.num_cpus=2",
           "hydra.launcher.object_store_memory=100000000", "+a=1,2,3,4,5,6"]
    # Ctrl-C as a terminal delivers it: a test run started in the background (a shell's `&` without job control)
    # passes SIGINT ignored to its children, and Python then never raises KeyboardInterrupt.
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 600  # Ray starts in seconds; on a loaded machine in minutes
        while not any("[1/6] #0 done" in ln for ln in lines):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=NEVER_S / 6)
        except subprocess.TimeoutExpired:
            raise AssertionError("the sweep went on after Ctrl-C: its jobs were awaited, not cancelled\n"
                                 + "".join(lines)) from None
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(timeout=10)
    out = " ".join("".join(lines).split())  # lines break between words at the terminal's width
    assert proc.returncode != 0
    # How many jobs were sent by then depends on when the signal lands (the launcher composes them one by one).
    assert re.search(r"Interrupted: cancelling [1-5] unfinished jobs and stopping Ray", out), out
    assert "Interrupted sweep" in out and "1 done, 0 failed" in out
    deadline = time.monotonic() + 180  # Ray's processes end as their parents notice; slowly on a loaded machine
    while _ray_processes(ray_tmp) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _ray_processes(ray_tmp)
