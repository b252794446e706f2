"""The real CLI on bad configurations: exit code 2, one stderr line naming the key, no traceback."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest



def _run(*overrides: str, tmp_path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}")
    return subprocess.run([sys.executable, "-m", "ipuexp", *overrides], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("overrides,key", [
    (["+recipe=bert_large", "options.io.num_io_tiles=7", "tracking.enabled=false"], "options.io.num_io_tiles"),
    (["+recipe=bert_large", "options.replication_factor=abc", "tracking.enabled=false"], "options.replication_factor"),
    (["+recipe=gpt2_medium", "options.gradient_accumulation=16", "tracking.enabled=false"],
     "options.gradient_accumulation"),
])
def test_cli_reports_config_error(overrides, key, tmp_path):
    proc = _run(*overrides, tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert key in lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
