"""``python -m ipuexp -m hydra/sweeper=optuna`` with settings its study cannot run: one line, exit code 2, before the
study starts (no storage file, no sweep folder)."""
from __future__ import annotations

import pytest

from tests.test_cli import run_cli

BASE = ["-m", "hydra/sweeper=optuna", "+recipe=bert_base", "hydra.sweep.dir=sweep"]


@pytest.mark.parametrize("override,named", [
    ("hydra.sweeper.storage=foo://db", "hydra.sweeper.storage='foo://db' is invalid"),
    ("hydra.sweeper.n_trials=0", "hydra.sweeper.n_trials=0 is invalid"),
    ("hydra.sweeper.n_jobs=0", "hydra.sweeper.n_jobs=0 is invalid"),
    ("hydra.sweeper.max_failure_rate=2", "hydra.sweeper.max_failure_rate=2"),
    ("hydra.sweeper.custom_search_space=nowhere.fn", "hydra.sweeper.custom_search_space='nowhere.fn' is invalid"),
    ("hydra/sweeper/sampler=nsgaii hydra.sweeper.sampler.population_size=1",
     "hydra.sweeper.sampler.population_size=1 is invalid"),
    ("options.available_memory_proportion=interval(0.5,0.1)",
     "options.available_memory_proportion='interval(0.5, 0.1)'"),
])
def test_a_setting_the_study_cannot_run_is_one_line(tmp_path, override, named):
    storage = [] if "storage" in override else ["hydra.sweeper.storage=sqlite:///study.db"]
    proc = run_cli(*BASE, *override.split(), *storage, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ipuexp: config error: ") and named in lines[0], proc.stderr
    assert not (tmp_path / "study.db").exists() and not (tmp_path / "sweep").exists()
