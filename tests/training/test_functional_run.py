"""Functional runs end to end: the MNIST tutorial recipe, tracking, progress, checkpoints and resume, bad input."""
from __future__ import annotations

import functools
from typing import Any, Dict, List, Tuple

import pytest
import torch
from functional_fixtures import MNIST, experiment, needs_mnist

from ipuexp.training import checkpoint, run_functional
from ipuexp.training.run import STEP_METRICS


class Recorder:
    """A tracker that keeps what it is sent; ``crash_at`` raises at that step, as a killed job would stop."""

    def __init__(self, crash_at: int = -1) -> None:
        self.steps: List[Tuple[int, Dict[str, float]]] = []
        self.crash_at = crash_at

    def log_step_metrics(self, step: int, values: Dict[str, float]) -> None:
        if step == self.crash_at:
            raise KeyboardInterrupt(f"crash at step {step}")
        self.steps.append((step, dict(values)))


@functools.lru_cache(maxsize=None)
def _register() -> None:
    from ipuexp.config.store import register

    register()


def recipe(name: str, overrides: List[str]) -> Any:
    """The recipe as ``python -m ipuexp +recipe=NAME`` composes and validates it."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from ipuexp.config.store import CONF_DIR
    from ipuexp.config.validate import validate

    _register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None, job_name="test"):
        cfg = compose(config_name="config", overrides=[f"+recipe={name}", *overrides])
    validate(cfg)
    return OmegaConf.to_object(cfg)


@needs_mnist
@pytest.mark.slow
def test_mnist_pipeline_recipe_reaches_97_percent(tmp_path, capsys):
    # The tutorial trains 3 epochs of 60,000 images (180,000 samples); on the 8,000 training images of the
    # shared split, 10 epochs (80,000 samples, 200 weight updates) are needed for the same accuracy.
    exp = recipe("mnist_pipeline", [f"data.path={MNIST}", "engine.device=cpu"])
    tracker = Recorder()
    figures = run_functional(exp, tracker=tracker, out_dir=tmp_path, predicted_samples_per_s=1234.5)
    assert figures.test_accuracy is not None and figures.test_accuracy >= 97.0
    assert figures.steps == 10 * 8000 // (40 * 10)  # weight updates: epochs x samples / (micro-batch x GA)
    assert figures.samples_per_s > 0 and figures.predicted_samples_per_s == 1234.5
    assert 0 < figures.final_loss < 0.5
    # per host call: 2 calls of 4000 samples per epoch, steps advance by the 10 device iterations of each
    assert [s for s, _ in tracker.steps] == list(range(10, 201, 10))
    assert all(set(m) == set(STEP_METRICS) for _, m in tracker.steps)
    assert tracker.steps[-1][1]["train_accuracy"] > tracker.steps[0][1]["train_accuracy"]
    assert sorted(p.name for p in checkpoint.folder(tmp_path).glob("epoch_*.pt")) == [
        f"epoch_{e:04d}.pt" for e in range(1, 11)]
    err = capsys.readouterr().err
    assert "Epoch 10/10" in err and "Loss:" in err and "Accuracy:" in err  # the tutorial's progress bar


def tiny_run(epochs: int, **kw: Any) -> Any:
    exp = experiment(epochs=epochs, mbs=8, ga=4, di=2, **kw)
    exp.model.name, exp.model.target = "custom", "functional_fixtures.tiny_model"
    exp.data.dataset = "synthetic"
    return exp


def saved_weights(path) -> Dict[str, torch.Tensor]:
    return checkpoint.load(path)["executor"]["model"]


def test_resume_after_a_crash_continues_exactly(tmp_path):
    """A run killed in epoch 3, before its checkpoint, and restarted with engine.resume=true ends where an
    uninterrupted run does."""
    full = run_functional(tiny_run(4), out_dir=tmp_path / "full", progress=False)
    crashed = Recorder(crash_at=6)  # one host call of 2 updates per epoch: step 6 ends epoch 3's only call
    with pytest.raises(KeyboardInterrupt):
        run_functional(tiny_run(4), tracker=crashed, out_dir=tmp_path / "crash", progress=False)
    assert checkpoint.latest(tmp_path / "crash").name == "epoch_0002.pt"
    resumed_tracker = Recorder()
    exp = tiny_run(4)
    exp.engine.resume = True
    resumed = run_functional(exp, tracker=resumed_tracker, out_dir=tmp_path / "crash", progress=False)
    assert [s for s, _ in resumed_tracker.steps] == [6, 8]
    assert resumed.steps == full.steps == 8 and resumed.final_loss == full.final_loss
    a, b = saved_weights(checkpoint.latest(tmp_path / "full")), saved_weights(checkpoint.latest(tmp_path / "crash"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_resume_without_checkpoint_starts_over(tmp_path, caplog):
    exp = tiny_run(1)
    exp.engine.resume = True
    figures = run_functional(exp, out_dir=tmp_path, progress=False)
    assert figures.steps == 2 and "no checkpoint" in caplog.text


def test_resume_refuses_another_models_checkpoint(tmp_path):
    run_functional(tiny_run(1), out_dir=tmp_path, progress=False)
    exp = tiny_run(2)
    exp.model.target = "functional_fixtures.wide_tiny_model"
    exp.engine.resume = True
    with pytest.raises(ValueError, match="engine.resume: checkpoint .* holds model 'custom:test:functional_fixtures"
                                         ".tiny_model', the run is for 'custom:test:functional_fixtures.wide_tiny"):
        run_functional(exp, out_dir=tmp_path, progress=False)


@needs_mnist
def test_inference_only_run(tmp_path):
    exp = experiment(mnist=True, mbs=8, di=25, layers_per_ipu=[1, 1, 1, 1])
    exp.training = False
    figures = run_functional(exp, out_dir=tmp_path, progress=False)
    assert figures.steps == 0 and figures.samples_per_s > 0
    assert 0 <= figures.test_accuracy <= 40  # untrained: about chance
    assert not checkpoint.folder(tmp_path).exists()


@needs_mnist
def test_evaluation_uses_the_inference_settings():
    """The tutorial's inference: micro-batch 8 and 100 device iterations over the 2,000 held-out images:
    calls of 800, 800 and 400 images, 250 micro-batches in all."""
    from ipuexp.training.worker import InstanceWorker

    exp = experiment(mnist=True, mbs=40, ga=10, di=10, layers_per_ipu=[1, 1, 1, 1])
    exp.data.test_micro_batch_size = 8
    exp.options.inference_device_iterations = 100
    worker = InstanceWorker(exp)
    worker.setup()
    assert worker.test_layout.samples_per_call == 800
    result = worker.evaluate()
    assert (result.samples, result.rows, result.loss_count) == (2000, 2000, 250)


def test_a_host_call_larger_than_the_data_is_refused(tmp_path):
    exp = experiment(mnist=True, mbs=40, ga=10, di=10, r=4, layers_per_ipu=[1, 1, 1, 1])
    if not MNIST.is_dir():
        pytest.skip("shared/data/mnist is not beside the project")
    with pytest.raises(ValueError, match=r"data: 8000 training samples are fewer than one host call \(16000"):
        run_functional(exp, out_dir=tmp_path, progress=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown where CUDA is missing")
def test_cuda_without_a_device_is_a_clear_error(tmp_path):
    exp = tiny_run(1)
    exp.engine.device = "cuda"
    with pytest.raises(ValueError, match="engine.device: 'cuda' is not allowed here"):
        run_functional(exp, out_dir=tmp_path, progress=False)
