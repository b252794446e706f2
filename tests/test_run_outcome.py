"""What a single run tells a user and a script: what ran (micro-batch, replicas, IPUs per replica, sequence length,
IPUs used of the system's and how to use the idle ones), whether it fits (``result.json``'s ``fits``; exit status 3
under ``report.fail_on_oom=true``), and nothing else on a fresh machine (no MLflow or matplotlib INFO lines)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from ipuexp.report.console import run_line
from ipuexp.result import RunFigures


def _run(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "IPUEXP_"))}
    env.update(HOME=str(tmp_path / "home"), MPLCONFIGDIR=str(tmp_path / "home" / "mpl"), COLUMNS="200",
               IPUEXP_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-m", "ipuexp", *overrides], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)


def _result(tmp_path: Path) -> dict:
    [path] = list((tmp_path / "outputs").glob("*/*/result.json"))
    return json.loads(path.read_text())


def test_run_line_names_the_batch_and_the_idle_ipus():
    gpt2_on_pod64 = RunFigures(micro_batch_size=1, replicas=2, ipus_per_replica=8, gradient_accumulation=4096,
                               device_iterations=8, system="pod64", system_ipus=64, sequence_length=1024)
    line = run_line(gpt2_on_pod64)
    assert "micro-batch 1, sequence length 1024, 2 replicas of 8 IPUs" in line
    assert "IPUs used 16 of 64 (pod64): 48 idle" in line
    assert "options.replication_factor=8 options.gradient_accumulation=1024 uses all 64 IPUs" in line
    resnet = RunFigures(micro_batch_size=20, replicas=16, ipus_per_replica=1, gradient_accumulation=10,
                        device_iterations=1, system="pod16", system_ipus=16)
    line = run_line(resnet)
    assert "sequence length" not in line and "16 replicas of 1 IPU," in line
    assert line.endswith("IPUs used 16 of 16 (pod16)")


@pytest.mark.slow
def test_a_run_on_a_fresh_machine(tmp_path: Path):
    out = _run(tmp_path, "+recipe=gpt2_medium", "system=pod64", "report.charts=never")
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    first: List[str] = out.stdout.splitlines()
    assert first[0].startswith("Ran: micro-batch 1, sequence length 1024, 2 replicas of 8 IPUs"), first[:3]
    assert "IPUs used 16 of 64 (pod64): 48 idle" in text
    assert "INFO mlflow" not in text and "fontManager" not in text, text[:2000]
    run = _result(tmp_path)["run"]
    assert (run["replicas"], run["ipus_per_replica"], run["system_ipus"]) == (2, 8, 64)


@pytest.mark.slow
def test_a_configuration_that_does_not_fit_can_fail_the_command(tmp_path: Path):
    oom = ("+recipe=bert_large", "options.recomputation.mode=none", "tracking.enabled=false", "report.charts=never")
    first = _run(tmp_path / "a", *oom) if (tmp_path / "a").mkdir() is None else None
    assert first.returncode == 0, first.stderr
    assert _result(tmp_path / "a")["fits"] is False
    failed = _run(tmp_path / "b", *oom, "report.fail_on_oom=true") if (tmp_path / "b").mkdir() is None else None
    assert failed.returncode == 3, failed.stderr
    assert _result(tmp_path / "b")["fits"] is False
    fits = _run(tmp_path / "c", "+recipe=bert_large", "tracking.enabled=false", "report.charts=never",
                "report.fail_on_oom=true") if (tmp_path / "c").mkdir() is None else None
    assert fits.returncode == 0, fits.stderr
