"""The worker ``python -m ipuexp`` forks as it starts: its task runs there, a failed task is reported (never printed),
a worker no task takes is ended, and a worker whose command is gone ends by itself. Each case runs in a fresh
process, as the command does (a worker is forked only by a process without other threads)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def _run(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    script = "import os, sys, time\nfrom ipuexp.runner import warm_worker\n" + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_the_task_runs_in_the_worker_after_its_preload_in_the_callers_folder(tmp_path: Path):
    proc = _run(tmp_path, """
        def task(path):
            open(path, "w").write(f"{os.getpid()} {'fractions' in sys.modules}")
            return "kept"

        warm_worker.start("fractions:Fraction")  # a module nothing else loads, and a function called without arguments
        os.mkdir("job")
        os.chdir("job")  # as a Hydra job moves into its folder: the task runs where the caller is
        join = warm_worker.submit(task, "done.txt")
        print("joined", join(), os.getpid(), "fractions" in sys.modules)
    """)
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout.split()
    assert said[:2] == ["joined", "True"] and said[3] == "False"  # loaded in the worker alone
    worker_pid, preloaded = (tmp_path / "job" / "done.txt").read_text().split()
    assert worker_pid != said[2] and preloaded == "True"
    assert proc.stderr == ""


def test_a_failed_task_is_reported_to_the_caller_not_printed(tmp_path: Path):
    proc = _run(tmp_path, """
        def task():
            raise RuntimeError("boom")

        warm_worker.start("os:getpid")
        print("joined", warm_worker.submit(task)())
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["joined", "False"]
    assert "boom" not in proc.stderr and "Traceback" not in proc.stderr


def test_without_a_worker_there_is_nothing_to_submit_to(tmp_path: Path):
    proc = _run(tmp_path, """
        print(warm_worker.submit(print, "never"))
        warm_worker.start("os:getpid")
        first = warm_worker.submit(print, "once")
        print(warm_worker.submit(print, "twice"), first())
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["None", "once", "None", "True"]


def test_a_worker_no_task_takes_is_ended(tmp_path: Path):
    proc = _run(tmp_path, """
        warm_worker.start("os:getpid")
        pid = warm_worker._worker[0]
        warm_worker.drop()
        try:
            os.kill(pid, 0)
            print("alive")
        except ProcessLookupError:
            print("ended")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["ended"]


def test_a_worker_ends_when_its_command_is_gone_though_a_later_child_lives(tmp_path: Path):
    """A process forked after the worker (the MLflow recorder) holds no end of its pipe: when the command's end
    closes, the worker sees it and ends, however long that child lives."""
    proc = _run(tmp_path, """
        warm_worker.start("os:getpid")
        pid, ours = warm_worker._worker
        later = os.fork()
        if later == 0:
            time.sleep(30)
            os._exit(0)
        warm_worker._worker = None
        ours.close()  # as when the command is killed
        deadline = time.time() + 20
        while time.time() < deadline and os.waitpid(pid, os.WNOHANG)[0] == 0:
            time.sleep(0.05)
        print("worker ended" if time.time() < deadline else "worker waits")
        os.kill(later, 9)
        os.waitpid(later, 0)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["worker", "ended"]
