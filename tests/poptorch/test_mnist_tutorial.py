"""The PopTorch pipelining tutorial's MNIST script, unmodified but for its data source: its prediction is the
``mnist_pipeline`` recipe's, its numerics are the functional engine's, and it trains to the tutorial's accuracy."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.poptorch.helpers import MNIST, recipe_prediction, run_script

ROOT = Path(__file__).resolve().parents[2]


def _figures(result):
    """The prediction's numbers: memory in bytes (exact), throughput and time (floats)."""
    t, m = result.throughput, result.memory
    return {"samples_per_s": t.samples_per_s, "step_time_s": t.step_time_s, "bubble": t.bubble_fraction,
            "breakdown": t.breakdown, "utilisation": t.utilisation, "fits": result.fits,
            "ipus": [(i.total_bytes, i.always_live_bytes, i.max_tile_bytes, i.breakdown) for i in m.ipus],
            "parameters": result.model.parameters}


def assert_same_prediction(ours, theirs):
    """Equal figures; floats to 1e-12 (the same terms, summed over the blocks' ops in another order). The error band
    is left out: it is drawn from the calibration rows of the model's family, and a script's model is its own."""
    a, b = _figures(ours), _figures(theirs)
    assert a["ipus"] == b["ipus"] and a["parameters"] == b["parameters"] and a["fits"] == b["fits"]
    for key in ("samples_per_s", "step_time_s", "bubble", "breakdown", "utilisation"):
        assert a[key] == pytest.approx(b[key], rel=1e-12), key


@pytest.mark.parametrize("strategy, schedule", [("pipelined", "grouped"), ("sharded", "sequential")])
def test_prediction_equals_the_recipes(tmp_path, strategy, schedule):
    job = run_script(MNIST, ["--strategy", strategy], ["system=pod4", "tracking.enabled=false"], tmp_path,
                     predict_only=True)
    opts = job.cfg.options
    assert list(opts.pipeline.layers_per_ipu) == [1, 1, 1, 1] and opts.pipeline.device_mapping is None
    assert opts.pipeline.schedule.value == schedule
    assert (opts.device_iterations, opts.gradient_accumulation, opts.output_mode.value) == (10, 10, "all")
    assert opts.tensor_locations.optimizer_state.on_chip is False
    assert (job.cfg.optimizer.name.value, job.cfg.optimizer.weight_decay) == ("adamw", 0.01)
    assert job.cfg.options.precision == "32.32" and job.cfg.data.micro_batch_size == 40
    recipe = recipe_prediction("options.tensor_locations.optimizer_state.on_chip=false",
                               f"options.pipeline.schedule={schedule}")
    assert_same_prediction(job.result, recipe)
    assert json.loads((tmp_path / "result.json").read_text())["throughput"]["samples_per_s"] == \
        pytest.approx(recipe.throughput.samples_per_s, rel=1e-12)
    assert (tmp_path / "config.yaml").is_file()


def test_losses_equal_the_functional_engines(tmp_path, monkeypatch):
    """One epoch of the script against ipuexp's functional engine (``Executor``, the recipe's plan) on the same
    batches: the same seed gives the same weights, and every micro-batch's loss is bitwise equal. The batches are
    the script's: its DataLoader shuffles with torch's sampler, the engine with its own order
    (``training.batching.epoch_order``), so the engine is fed the script's batches."""
    import torch

    from ipuexp.config.compose import load_experiment
    from ipuexp.models import build_model
    from ipuexp.poptorch.executor import PoplarExecutor
    from ipuexp.training.executor import Executor
    from ipuexp.training.plan import make_plan

    calls = []
    train = PoplarExecutor._train

    def recorded(self, args, kwargs):
        out = train(self, args, kwargs)
        calls.append(([a.clone() for a in args], out[1].clone()))
        return out

    monkeypatch.setattr(PoplarExecutor, "_train", recorded)
    run_script(MNIST, ["--epochs", "1"], ["system=pod4", "tracking.enabled=false"], tmp_path)
    assert len(calls) == 2  # 8,000 samples, 4,000 per call, drop_last

    exp = load_experiment("+recipe=mnist_pipeline", "options.tensor_locations.optimizer_state.on_chip=false")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(42)
        model = build_model(exp.model)
    engine = Executor(model, make_plan(exp, list(model.blocks)), exp.optimizer)
    for (images, labels), losses in calls:
        shaped = [images.reshape(10, 1, 10, 40, 1, 28, 28), labels.to(torch.int32).reshape(10, 1, 10, 40)]
        out = engine.train_call(shaped)
        assert losses.shape == (100,)
        assert torch.equal(out.losses, losses)


@pytest.mark.slow
def test_trains_to_the_tutorials_accuracy(tmp_path):
    """``python -m ipuexp.poptorch`` runs the script: the report, 10 epochs, >= 97% on the held-out images, the
    losses in MLflow."""
    env = dict(os.environ, COLUMNS="100", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "ipuexp.poptorch", "--system", "pod4", str(MNIST), "--", 
                           f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "the script's options as ipuexp overrides:" in out and "Memory per IPU" in out
    accuracy = float(re.search(r"Accuracy on test set: ([\d.]+)%", out).group(1))
    assert accuracy >= 97.0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["functional"]["steps"] == 200
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.search_runs([client.get_experiment_by_name("mnist_pipelining").experiment_id])[0]
    assert run.info.status == "FINISHED"
    assert len(client.get_metric_history(run.info.run_id, "train_loss")) == 200
