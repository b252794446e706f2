"""Small models, data and configurations shared by the functional-engine tests."""
from __future__ import annotations

from pathlib import Path
from typing import Any, List, Tuple

import pytest
import torch
from torch import nn

from ipuexp.config.schema import (DataConfig, ExperimentConfig, ModelConfig, Optimizer, OutputMode,
                                  RecomputationMode, ReductionType, Schedule)
from ipuexp.data import PACKAGED_MNIST
from ipuexp.models.blocks import Block, InputSpec, PipelinedModel

MNIST = PACKAGED_MNIST
needs_mnist = pytest.mark.skipif(not MNIST.is_dir(), reason="the packaged MNIST test set is missing")


class Dense(nn.Module):
    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)

    def forward(self, x: torch.Tensor, *labels: Any) -> Tuple[Any, ...]:
        return (torch.tanh(self.fc(x)), *labels)


class Head(nn.Module):
    def __init__(self, n_in: int, classes: int) -> None:
        super().__init__()
        self.fc = nn.Linear(n_in, classes)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        logits = self.fc(x)
        return nn.functional.cross_entropy(logits, y.long()), logits


def tiny_model(seed: int = 0, layers: int = 4, width: int = 16, features: int = 8, classes: int = 3) -> PipelinedModel:
    """embed -> ``layers`` dense layers -> head (loss with the last layer's block neighbour)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        blocks = [Block("embed", Dense(features, width))]
        blocks += [Block(f"L{i}", Dense(width, width), is_layer=True) for i in range(layers)]
        blocks.append(Block("head", Head(width, classes)))
    spec = [InputSpec("x", (features,)), InputSpec("y", (), "int32", is_label=True, high=classes)]
    return PipelinedModel(blocks, name="tiny", input_spec=spec)


def tiny_data(samples: int = 512, seed: int = 1, features: int = 8, classes: int = 3) -> Tuple[torch.Tensor, ...]:
    """A learnable problem: the label is the argmax of a fixed projection of the input."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, features, generator=g)
    w = torch.randn(features, classes, generator=g)
    return x, (x @ w).argmax(dim=1).to(torch.int32)


def experiment(**kw: Any) -> ExperimentConfig:
    """An ExperimentConfig; keys: mbs, ga, di, r, inst, layers_per_ipu, schedule, precision, sr, ls, als, out,
    rec, every_layer, reduction, opt, lr, wd, state, seed, epochs, mnist (use the tutorial network on MNIST)."""
    exp = ExperimentConfig()
    if kw.get("mnist"):
        exp.model = ModelConfig(name="mnist_cnn", size="tutorial", image_size=28)
        exp.data = DataConfig(micro_batch_size=kw.get("mbs", 4), dataset="mnist", path=str(MNIST))
    else:
        exp.model = ModelConfig(name="tiny", size="test")
        exp.data = DataConfig(micro_batch_size=kw.get("mbs", 4))
    o = exp.options
    o.gradient_accumulation = kw.get("ga", 8)
    o.device_iterations = kw.get("di", 1)
    o.replication_factor = kw.get("r", 1)
    o.num_instances = kw.get("inst", 1)
    o.pipeline.layers_per_ipu = list(kw.get("layers_per_ipu", [2, 1, 1]))
    o.pipeline.schedule = Schedule(kw.get("schedule", "grouped"))
    o.precision = kw.get("precision", "32.32")
    o.stochastic_rounding = kw.get("sr", False)
    o.loss_scaling = kw.get("ls", 1.0)
    o.auto_loss_scaling = kw.get("als", False)
    o.output_mode = OutputMode(kw.get("out", "all"))
    o.recomputation.mode = RecomputationMode(kw.get("rec", "pipeline"))
    o.recomputation.checkpoint_every_layer = kw.get("every_layer", False)
    o.reduction_type = ReductionType(kw.get("reduction", "mean"))
    o.random_seed = kw.get("seed", 42)
    exp.optimizer.name = Optimizer(kw.get("opt", "adamw"))
    exp.optimizer.learning_rate = kw.get("lr", 0.01)
    exp.optimizer.weight_decay = kw.get("wd", 0.01)
    exp.optimizer.state_precision = kw.get("state", "float")
    exp.engine.epochs = kw.get("epochs", 1)
    exp.engine.device = "cpu"
    return exp


def executor(**kw: Any):
    from ipuexp.training.executor import Executor
    from ipuexp.training.plan import make_plan

    model = tiny_model(kw.pop("model_seed", 0))
    exp = experiment(**kw)
    return Executor(model, make_plan(exp, list(model.blocks)), exp.optimizer)


def call_batch(ex: Any, data: Tuple[torch.Tensor, ...], call: int, instance: int = 0, epoch: int = 0) -> List[Any]:
    """The host call's tensors for ``instance``, laid out [iterations, replicas, GA, micro-batch, ...]."""
    from ipuexp.training.batching import epoch_order, instance_indices

    layout = ex.plan.layout
    order = epoch_order(int(data[0].shape[0]), ex.plan.seed, epoch)
    idx = instance_indices(order, call * layout.samples_per_call, layout.device_iterations, layout, instance)
    return [t[idx] for t in data]


def weights(ex: Any) -> List[torch.Tensor]:
    return [p.detach().clone() for p in ex.params]


def train(ex: Any, data: Tuple[torch.Tensor, ...], calls: int) -> List[float]:
    return [ex.train_call(call_batch(ex, data, c)).mean_loss for c in range(calls)]


def wide_tiny_model() -> PipelinedModel:
    """Another model (for checkpoints that must not be mixed up)."""
    return tiny_model(width=24)
