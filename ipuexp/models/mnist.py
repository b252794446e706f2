"""The PopTorch pipelining tutorial's MNIST network ("Model definition" and "Annotation for model partitioning"),
in its four blocks B1 to B4; the loss sits in B4 with the last layer, as in the tutorial's
``TrainingModelWithLoss``.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import torch
from torch import nn

from ipuexp.models.blocks import Block, InputSpec, PipelinedModel


class ConvLayer(nn.Module):
    """Conv2d, MaxPool2d, ReLU (the tutorial's ``ConvLayer``)."""

    def __init__(self, in_channels: int, num_filters: int, kernel_size: int, pool_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, num_filters, kernel_size=kernel_size)
        self.pool = nn.MaxPool2d(kernel_size=pool_size)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor, *labels: Any) -> Tuple[Any, ...]:
        return (self.relu(self.pool(self.conv(x))), *labels)


class Hidden(nn.Module):
    """B3: ``x.view(-1, 320)``, Linear(320, 256), ReLU."""

    def __init__(self) -> None:
        super().__init__()
        self.layer3 = nn.Linear(320, 256)
        self.layer3_act = nn.ReLU()

    def forward(self, x: torch.Tensor, *labels: Any) -> Tuple[Any, ...]:
        return (self.layer3_act(self.layer3(x.view(-1, 320))), *labels)


class Output(nn.Module):
    """B4: Linear(256, classes) and CrossEntropyLoss."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.layer4 = nn.Linear(256, classes)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        logits = self.layer4(x)
        return self.loss(logits, labels.long()), logits


def build_mnist_cnn(hp: Dict[str, Any], name: str = "mnist_cnn") -> PipelinedModel:
    """The tutorial network; every block is a layer so ``layers_per_ipu: [1, 1, 1, 1]`` gives its 4 stages."""
    blocks = [
        Block("B1", ConvLayer(1, 10, 5, 2), is_layer=True),
        Block("B2", ConvLayer(10, 20, 5, 2), is_layer=True),
        Block("B3", Hidden(), is_layer=True),
        Block("B4", Output(hp["classes"]), is_layer=True),
    ]
    spec = [
        InputSpec("images", (1, 28, 28), "float32"),
        InputSpec("labels", (), "int32", is_label=True, high=hp["classes"]),
    ]
    return PipelinedModel(blocks, name=name, input_spec=spec, hparams=dict(hp))
