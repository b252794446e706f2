"""``python -m ipuexp --help``: the tool, its other commands and its recipes, within the terminal."""
from __future__ import annotations

import os
import subprocess
import sys

from ipuexp.config.store import recipe_names


def test_help_names_the_commands_and_recipes_and_fits_80_columns(tmp_path):
    env = dict(os.environ, COLUMNS="80")
    proc = subprocess.run([sys.executable, "-m", "ipuexp", "--help"], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "powered by Hydra" not in out
    for command in ("ipuexp.plan", "ipuexp.recipes", "ipuexp.report", "ipuexp.validate", "ipuexp.poptorch"):
        assert f"python -m {command}" in out
    assert "model.name=custom model.target=" in out
    flat = " ".join(out.split())
    assert all(name in flat for name in recipe_names())
    assert max(len(line) for line in out.splitlines()) <= 80
