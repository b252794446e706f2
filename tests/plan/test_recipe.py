"""``--write-recipe``: the written recipe extends the one planned from, sets only what changed, and composed as
``+recipe=NAME`` predicts what the planner reported for the candidate it was written from."""
from __future__ import annotations

import subprocess
import sys

import pytest

from ipuexp.config.compose import compose_recipe, load_experiment
from ipuexp.config.errors import ConfigError
from ipuexp.config.user_recipes import ENV_VAR
from ipuexp.plan.candidate import differences, from_config
from ipuexp.plan.planner import plan
from ipuexp.plan.recipe import write_best_recipe
from ipuexp.plan.settings import PlanConfig


@pytest.fixture
def recipe_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "recipes"))
    return tmp_path / "recipes"


@pytest.fixture(scope="module")
def planned():
    # BERT-Base on an IPU-POD16 with a few hundred candidates: the best changes the pipeline split and the AMP.
    return plan(compose_recipe("bert_base"), PlanConfig(trials=150, top_k=3), quiet=True)


def test_written_recipe_round_trips_to_the_planned_numbers(planned, recipe_dir):
    from ipuexp.runner.evaluation import evaluate

    best = planned.best
    assert differences(best.candidate, planned.problem.recipe), "the test needs a best that changes something"
    path = write_best_recipe(planned, best, "bert_base_planned")
    text = path.read_text()
    assert "  - /recipe/bert_base\n  - override /system: pod16\n  - override /ipu: mk2\n" in text
    assert "# Planned by python -m ipuexp.plan from recipe bert_base" in text
    assert f"Predicted {best.samples_per_s:,.0f}" in text
    assert "planned; bert_base:" in text
    # Only what differs is set: nothing of the model, the optimizer or the data it does not change.
    assert "model:" not in text and "optimizer:" not in text
    exp = load_experiment("+recipe=bert_base_planned")
    assert exp.recipe == "bert_base_planned"
    result = evaluate(exp).result
    assert result.throughput.samples_per_s == pytest.approx(best.samples_per_s, rel=1e-9)
    assert [m.max_tile_bytes for m in result.memory.ipus] == best.ipu_tile_bytes
    assert max(m.total_bytes for m in result.memory.ipus) == best.peak_ipu_bytes
    assert result.fits


def test_recipe_on_another_system_overrides_it(recipe_dir):
    p = plan(compose_recipe("bert_base", ["system=pod64"]), PlanConfig(trials=40, top_k=1, refine=False),
             quiet=True)
    path = write_best_recipe(p, p.best, "bert_base_pod64_planned")
    assert "  - override /system: pod64\n" in path.read_text()
    exp = load_experiment("+recipe=bert_base_pod64_planned")
    assert exp.system.name == "pod64"
    assert from_config(exp) == p.best.candidate


def test_existing_and_packaged_names_are_refused(planned, recipe_dir):
    write_best_recipe(planned, planned.best, "mine")
    with pytest.raises(ConfigError, match="exists"):
        write_best_recipe(planned, planned.best, "mine")
    write_best_recipe(planned, planned.best, "mine", overwrite=True)
    with pytest.raises(ConfigError, match="packaged recipe"):
        write_best_recipe(planned, planned.best, "bert_large")


@pytest.mark.slow
def test_cli_writes_a_recipe_of_the_launch_directory(tmp_path, monkeypatch):
    proc = subprocess.run([sys.executable, "-m", "ipuexp.plan", "-q", "+recipe=mnist_pipeline",
                           "tracking.enabled=false", "plan.trials=60", "plan.top_k=1",
                           "--write-recipe", "mnist_planned"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"Wrote recipe {tmp_path / 'recipes' / 'mnist_planned.yaml'}" in " ".join(proc.stdout.split())
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "recipes"))
    exp = load_experiment("+recipe=mnist_planned")
    assert exp.recipe == "mnist_planned" and exp.engine.mode.value == "functional"
