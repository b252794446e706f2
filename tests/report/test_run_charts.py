"""A single run's charts: drawn by the worker ``python -m ipuexp`` forked as it started (the run's own process never
loads matplotlib), and, where the worker fails, drawn by the run itself, to the same bytes."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHARTS = ["liveness.png", "memory.png", "pipeline.png", "trace.json.gz"]

DRIVER = """
import atexit, os, sys
import ipuexp.commands.run as cli
from ipuexp.report import run_charts

command = os.getpid()
if {fail!r}:
    def draw_charts(exp, out):  # sent to the worker by name: fails there alone
        if os.getpid() != command:
            raise RuntimeError("the worker failed")

    run_charts.draw_charts = draw_charts
atexit.register(lambda: print("run loaded matplotlib:", "matplotlib" in sys.modules))
sys.argv = ["ipuexp"]
cli.main({args!r})
"""


def _run(tmp_path: Path, folder: str, fail: bool) -> subprocess.CompletedProcess:
    args = ["+recipe=bert_base", "tracking.enabled=false", f"hydra.run.dir={folder}"]
    return subprocess.run([sys.executable, "-c", DRIVER.format(args=args, fail=fail)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)


def test_the_worker_draws_the_charts_the_run_would_draw_itself(tmp_path: Path):
    drawn = _run(tmp_path, "worker", fail=False)
    assert drawn.returncode == 0, drawn.stderr[-3000:]
    assert "run loaded matplotlib: False" in drawn.stdout
    assert "liveness.png, memory.png, pipeline.png" in " ".join(drawn.stdout.split())  # the files it says it wrote
    made_good = _run(tmp_path, "itself", fail=True)
    assert made_good.returncode == 0, made_good.stderr[-3000:]
    assert "run loaded matplotlib: True" in made_good.stdout
    assert "Traceback" not in made_good.stderr and "the worker failed" not in made_good.stderr
    for name in CHARTS:
        assert (tmp_path / "worker" / name).read_bytes() == (tmp_path / "itself" / name).read_bytes(), name
    for folder in ("worker", "itself"):
        artifacts = json.loads((tmp_path / folder / "result.json").read_text())["artifacts"]
        assert artifacts["gantt"] == str(tmp_path / folder / "pipeline.png")
        assert sorted(artifacts) == ["config", "gantt", "liveness_chart", "memory_chart", "result", "trace"]
