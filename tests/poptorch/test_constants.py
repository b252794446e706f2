"""A model without a batched input, its plain tensor attributes as compiled constants and its buffers as state (the
PopTorch user guide's buffers.py), and an inference capture that saves nothing for a backward pass."""
from __future__ import annotations

import torch

import ipuexp.poptorch as poptorch
from tests.poptorch.test_checks import job  # noqa: F401 (a fixture)


class _Counter(torch.nn.Module):
    def __init__(self, buffer: bool) -> None:
        super().__init__()
        if buffer:
            self.register_buffer("i", torch.tensor([0.0]))
        else:
            self.i = torch.tensor([0.0])

    def forward(self):
        self.i += 1
        return self.i


def test_a_constant_reads_its_compiled_value_and_a_buffer_keeps_state(job):  # noqa: F811
    constant = _Counter(buffer=False)
    model = poptorch.inferenceModel(constant)
    assert [model().tolist() for _ in range(2)] == [[1.0], [1.0]]
    assert constant.i.tolist() == [0.0]  # the writes stay on the IPU
    counter = _Counter(buffer=True)
    model = poptorch.inferenceModel(counter)
    assert [model().tolist() for _ in range(2)] == [[1.0], [2.0]]
    assert counter.i.tolist() == [2.0]


class _WithLoss(torch.nn.Module):
    """The model and a scalar loss of its output: a training model returns its loss."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x).mean()


def test_an_inference_capture_saves_no_activations():
    from ipuexp.poptorch.capture import split_model

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x = torch.randn(4, 8)
    inference = split_model(model, (x,), {}, 4, False, "m").graph.blocks[0]
    training = split_model(_WithLoss(model), (x,), {}, 4, True, "m").graph.blocks[0]
    assert inference.saved_elements == 0 and inference.bwd_flops == 0
    assert training.saved_elements > 0
