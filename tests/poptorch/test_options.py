"""poptorch.Options as PopTorch keeps them: frozen once a model or DataLoader uses them (a copy is not), the
defaults of POPTORCH_DEFAULT_OPTIONS, a file of setter calls, and the output mode a compiled model resolves."""
from __future__ import annotations

import copy

import pytest
import torch

import ipuexp.poptorch as poptorch


def test_options_are_frozen_once_used_and_copies_are_not():
    opts = poptorch.Options()
    poptorch.DataLoader(opts, torch.utils.data.TensorDataset(torch.ones(8)))
    for change in (lambda o: o.randomSeed(1), lambda o: o.Training.gradientAccumulation(2),
                   lambda o: o._Popart.set("key", 1), lambda o: o.anchorTensor("a", "b"),
                   lambda o: o.TensorLocations.setWeightLocation(poptorch.TensorLocationSettings())):
        with pytest.raises(poptorch.Error, match="Can't modify frozen Options"):
            change(opts)
    copied = copy.deepcopy(opts)
    copied.deviceIterations(5).Training.gradientAccumulation(4)
    assert copied.device_iterations == 5 and opts.device_iterations == 1


def test_a_model_resolves_the_default_output_mode_on_its_own_copy():
    model = torch.nn.Linear(2, 2)
    opts = poptorch.Options()
    assert poptorch.inferenceModel(model, opts).options.output_mode == poptorch.OutputMode.All
    assert opts.defaultOutputMode()
    assert isinstance(opts._execution_strategy, poptorch.PipelinedExecution)


def test_default_options_from_the_environment(monkeypatch):
    monkeypatch.setenv("POPTORCH_DEFAULT_OPTIONS", '{"deviceIterations": 2, "Precision.enableStochasticRounding": '
                                                   'true, "_Popart.set": ["autoRecomputation", 3], '
                                                   '"connectionType": "ConnectionType.OnDemand"}')
    opts = poptorch.Options()
    assert opts.device_iterations == 2 and opts.Precision.stochastic_rounding is True
    assert opts._Popart.options == {"autoRecomputation": 3}
    assert opts.calls["connectionType"] == poptorch.ConnectionType.OnDemand
    monkeypatch.delenv("POPTORCH_DEFAULT_OPTIONS")
    assert repr(opts) != repr(poptorch.Options())
    assert repr(opts) == repr(poptorch.Options().deviceIterations(2).connectionType(poptorch.ConnectionType.OnDemand)
                              .Precision.enableStochasticRounding(True) and opts)


def test_load_from_file(tmp_path):
    path = tmp_path / "run.conf"
    path.write_text("deviceIterations(3)\n  replicationFactor(2)  # inline comment\n\n# comment\n"
                    "setExecutionStrategy(poptorch.ShardedExecution())\n")
    opts = poptorch.Options().loadFromFile(str(path))
    assert opts.device_iterations == 3 and opts.replication_factor == 2
    assert isinstance(opts.execution_strategy, poptorch.ShardedExecution)
    path.write_text("deviceIterations(1)\noutputMode(poptorch.OutputMode.All\n")
    with pytest.raises(poptorch.options.ConfigFileError, match=r"SyntaxError at line 2 of run.conf: .*\n"
                                                               r"> options.outputMode\(poptorch.OutputMode.All"):
        poptorch.Options().loadFromFile(str(path))


def test_num_io_tiles_is_checked_as_poptorch_checks_it():
    with pytest.raises(AssertionError, match="numIOTiles must be an even number between 32 and 192."):
        poptorch.Options().TensorLocations.numIOTiles(33)
    assert poptorch.Options().TensorLocations.numIOTiles(192).num_io_tiles == 192

