"""A disk that fills while a run writes its charts and trace: the files are whole or absent (never a 0-byte PNG or a
truncated trace that reads as valid), the run says so on one warning line and keeps its result, and no temporary
file is left."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.test_cli import ROOT

FULL_DISK = """
import errno, sys
from pathlib import Path

import matplotlib.figure


def full(path, data):
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])  # what fitted before the disk was full
    raise OSError(errno.ENOSPC, "No space left on device")


def write_bytes(self, data, _real=Path.write_bytes):
    if ".trace.json.gz." in self.name:
        full(self, data)
    return _real(self, data)


def savefig(self, fname, *args, **kwargs):
    full(fname, b"\\x89PNG" * 64)


Path.write_bytes = write_bytes
matplotlib.figure.Figure.savefig = savefig
from ipuexp.commands.run import main
main(sys.argv[1:])
"""


def test_charts_and_trace_on_a_full_disk_are_absent_not_truncated(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, "+recipe=mnist_pipeline", "engine.mode=analytic",
                           "tracking.enabled=false", "hydra.run.dir=run"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    warnings = [ln for ln in proc.stdout.splitlines() if "the charts were not written" in ln]
    assert len(warnings) == 1 and "No space left on device" in warnings[0], proc.stdout[-3000:]
    run = tmp_path / "run"
    names = sorted(p.name for p in run.iterdir())
    assert not {"pipeline.png", "memory.png", "liveness.png", "trace.json.gz"} & set(names), names
    assert not [n for n in names if n.endswith(".tmp")], names
    result = json.loads((run / "result.json").read_text())
    assert not {"gantt", "trace", "memory_chart", "liveness_chart"} & set(result["artifacts"])
