"""The planner's last line names its MLflow experiment as a run's report does: by name, not by MLflow's number."""
from __future__ import annotations

import pytest

from ipuexp.commands.plan import main


@pytest.mark.slow
def test_last_line_names_the_experiment(tmp_path, db_uri, capsys):
    assert main(["-q", "+recipe=bert_base", f"tracking.uri={db_uri}", f"plan.out_dir={tmp_path / 'plan'}",
                 "plan.trials=30"]) == 0
    out = capsys.readouterr().out.rstrip()
    last = " ".join(out[out.rindex("\nMLflow run "):].split())  # the last paragraph, wrapped to the terminal
    assert last.startswith("MLflow run ") and last.endswith("in experiment 'bert_base' (see it with mlflow ui)"), last
