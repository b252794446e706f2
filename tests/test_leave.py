"""``python -m ipuexp`` ends without the interpreter's teardown: what it wrote is flushed, its exit handlers run, its
exit status is kept, and a thread of its own still at work is waited for."""
from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(body: str, tmp_path) -> subprocess.CompletedProcess:
    code = textwrap.dedent(f"""
        import atexit, sys
        from ipuexp.commands.run import leave
        atexit.register(lambda: open({str(tmp_path / "handler")!r}, "w").write("ran"))
        print("buffered", end="")
        {body}
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_fast_exit_flushes_runs_exit_handlers_and_keeps_the_status(tmp_path):
    proc = _run("leave(3)", tmp_path)
    assert proc.returncode == 3 and proc.stdout == "buffered"
    assert (tmp_path / "handler").read_text() == "ran"
    assert _run("leave(None)", tmp_path).returncode == 0
    said = _run("leave('ipuexp: a message')", tmp_path)
    assert said.returncode == 1 and "ipuexp: a message" in said.stderr


def test_a_thread_still_at_work_is_waited_for(tmp_path):
    body = (f"import threading, time\n"
            f"threading.Thread(target=lambda: (time.sleep(0.5), open({str(tmp_path / 'thread')!r}, 'w')"
            f".write('done'))).start()\n"
            f"leave(0)")
    proc = _run(body.replace("\n", "\n        "), tmp_path)
    assert proc.returncode == 0
    assert (tmp_path / "thread").read_text() == "done"
