"""A sweep whose driver was killed outright (``kill -9``) leaves its parent run RUNNING; the next run of the same
command closes it (KILLED, with the reason), and its children left RUNNING, but never a parent whose driver runs."""
from __future__ import annotations

import os
import subprocess
import sys

from ipuexp.tracking.resume import DRIVER_PROCESS_TAG, close_orphans, driver_process
from ipuexp.tracking.store import client
from ipuexp.tracking.sweep import COMMAND_TAG, PARENT_TAG


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_killed_drivers_parent_is_closed_when_the_command_runs_again(db_uri):
    import socket

    c = client(db_uri)
    exp = c.create_experiment("e")
    host = socket.gethostname()

    def parent(process: str, key: str = "k1") -> str:
        return c.create_run(exp, tags={COMMAND_TAG: key, DRIVER_PROCESS_TAG: process}).info.run_id

    killed = parent(f"{host}:{_dead_pid()}")
    child = c.create_run(exp, tags={PARENT_TAG: killed}).info.run_id
    done_child = c.create_run(exp, tags={PARENT_TAG: killed}).info.run_id
    c.set_terminated(done_child, "FINISHED")
    alive = parent(f"{host}:{os.getppid()}")  # a driver that still runs (this test's parent process)
    elsewhere = parent(f"another-host:{_dead_pid()}")  # cannot be told from here
    other_command = parent(f"{host}:{_dead_pid()}", key="k2")
    mine = parent(driver_process())

    assert close_orphans(c, exp, "k1", mine) == 1
    status = {r: c.get_run(r).info.status for r in (killed, child, done_child, alive, elsewhere, other_command, mine)}
    assert status == {killed: "KILLED", child: "KILLED", done_child: "FINISHED", alive: "RUNNING",
                      elsewhere: "RUNNING", other_command: "RUNNING", mine: "RUNNING"}
    assert "killed outright" in c.get_run(killed).data.tags["error"]
    assert close_orphans(c, exp, "k1", mine) == 0  # once
