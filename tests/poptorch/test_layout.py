"""Where a PopTorch script's runs go: the MLflow experiment named after the script."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("argv0, name", [("/home/u/train.py", "train"), ("/home/u/trainer/__main__.py", "trainer"),
                                         ("-c", "poptorch"), ("", "poptorch")])
def test_a_scripts_runs_go_to_the_experiment_named_after_it(monkeypatch, argv0, name):
    from ipuexp.poptorch.layout import script_name

    monkeypatch.setattr("sys.argv", [argv0])
    assert script_name() == name
