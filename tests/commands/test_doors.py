"""``python -m ipuexp.<command>`` runs its command from ``ipuexp.commands``; the doors import none of it, so no folder
below the commands depends on them."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOORS = {
    "ipuexp": "python -m ipuexp",
    "ipuexp.plan": "python -m ipuexp.plan",
    "ipuexp.validate": "python -m ipuexp.validate",
    "ipuexp.calibrate": "python -m ipuexp.calibrate",
    "ipuexp.report": "python -m ipuexp.report",
    "ipuexp.recipes": "python -m ipuexp.recipes",
    "ipuexp.poptorch": "python -m ipuexp.poptorch",
}


@pytest.mark.parametrize("door", sorted(DOORS))
def test_each_door_runs_its_command(door, tmp_path):
    proc = subprocess.run([sys.executable, "-m", door, "--help"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert DOORS[door] in proc.stdout


def test_the_doors_import_nothing():
    graph = grimp.build_graph("ipuexp")
    doors = [m for m in graph.modules if m.endswith(".__main__") or m in ("ipuexp.validate", "ipuexp.calibrate")]
    assert len(doors) == 7
    assert {d: sorted(i for i in graph.find_modules_directly_imported_by(d) if i.startswith("ipuexp"))
            for d in doors} == {d: [] for d in doors}


@pytest.mark.slow
def test_validate_through_its_door_reads_its_settings(tmp_path):
    # The command runs as __main__; its structured settings live in a module of their own so that OmegaConf can
    # read their annotations (the --help above never loads them).
    proc = subprocess.run([sys.executable, "-m", "ipuexp.validate", "--no-loo"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "in-sample MAPE" in proc.stdout
