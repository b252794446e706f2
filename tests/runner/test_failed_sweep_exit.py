"""A sweep with a failed point ends on its summary (the failure listed once, with its log file), exit status 1,
without Hydra's repeat of the error or its HYDRA_FULL_ERROR hint, and without the jobs' lock file."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ipuexp.tracking.sweep import LOCK_NAME


@pytest.mark.slow
def test_failed_point_is_told_once_and_leaves_no_lock(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "HYDRA_", "RAY_"))}
    env.update(IPUEXP_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="200")
    out = subprocess.run([sys.executable, "-m", "ipuexp", "-m", "+recipe=bert_large",
                          "options.replication_factor=4,8", "hydra.sweep.dir=sweep"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    # Its progress line and the summary name the failure; nothing repeats the error after the summary.
    assert text.count("options.replication_factor=8 is invalid") == 2, text
    assert not any(line.startswith("options.replication_factor=8") for line in text.splitlines()), text
    assert "HYDRA_FULL_ERROR" not in text
    assert "1 done, 1 failed" in text
    assert (tmp_path / "sweep" / "multirun.yaml").exists()
    assert not (tmp_path / "sweep" / LOCK_NAME).exists()
