"""PopTorch's checks of overlapped host IO at a model's first call."""
from __future__ import annotations

import pytest
import torch

import ipuexp.poptorch as poptorch
from ipuexp.poptorch.session import Session, session

OVERLAP = poptorch.OverlapMode.OverlapAccumulationLoop


def _sharded(io_tiles: int = 32) -> poptorch.Options:
    opts = poptorch.Options().setExecutionStrategy(poptorch.ShardedExecution())
    if io_tiles:
        opts.TensorLocations.numIOTiles(io_tiles)
    return opts


class _Model(torch.nn.Module):
    def __init__(self, forward):
        super().__init__()
        self.f = forward

    def forward(self, x):
        return self.f(x)


def _run(forward, opts=None):
    return poptorch.inferenceModel(_Model(forward), opts or _sharded())(torch.tensor([1.0, 2.0]))


def test_a_well_marked_model_runs(job):
    out = _run(lambda x: poptorch.set_overlap_for_output(poptorch.set_overlap_for_input(x, OVERLAP) * 2, OVERLAP))
    assert out.tolist() == [2.0, 4.0]


@pytest.mark.parametrize("forward,message", [
    (lambda x: (x + 1, poptorch.set_overlap_for_input(x, OVERLAP)), "must be the only op applied to an input. "
     "This is not the case for input 0"),
    (lambda x: poptorch.set_overlap_for_input(x + 1, OVERLAP), "applied on a node which is not a tensor input"),
    (lambda x: poptorch.set_overlap_for_output(x + 1, OVERLAP).sum(), "applied on a node which is not a tensor "
     "output"),
    (lambda x: (lambda y: (y, poptorch.set_overlap_for_output(y, OVERLAP)))(x + 1), "returned twice"),
])
def test_marks_that_poptorch_refuses(job, forward, message):
    with pytest.raises(poptorch.Error, match=message):
        _run(forward)


def test_overlap_needs_sharded_execution_and_io_tiles(job):
    marked = lambda x: poptorch.set_overlap_for_input(x, OVERLAP) + 1  # noqa: E731
    with pytest.raises(poptorch.Error, match="not supported with poptorch.PipelinedExecution"):
        _run(marked, poptorch.Options())
    with pytest.raises(poptorch.Error, match="No IO tiles allocated"):
        _run(marked, _sharded(io_tiles=0))
    unmarked = lambda x: poptorch.set_overlap_for_input(x, poptorch.OverlapMode.NoOverlap) + 1  # noqa: E731
    assert _run(unmarked, poptorch.Options()).tolist() == [2.0, 3.0]


def test_the_capture_keeps_parameters_parameters(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the prediction's MLflow run goes to ./mlflow.db, as a user's does
    class Lookup(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2))

        def forward(self, x):
            return x * self.get_parameter("w")

    with session(Session(None, [], tmp_path, predict_only=True)):
        with pytest.raises(poptorch.errors.PredictionDone):
            poptorch.inferenceModel(Lookup())(torch.ones(4, 2))
