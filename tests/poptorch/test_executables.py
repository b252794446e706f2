"""PopTorch's executable files: compileAndExport/save write the model, its options and optimizer; poptorch.load
rebuilds an executor that trains on from there; loadExecutable checks a file against a model built in Python."""
from __future__ import annotations

import pytest
import torch

import ipuexp.poptorch as poptorch


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x, target=None):
        out = self.fc(x)
        return out if target is None else (out, torch.nn.functional.cross_entropy(out, target))


def test_export_load_and_train_on(tmp_path):
    torch.manual_seed(0)
    x, y = torch.randn(2, 4), torch.tensor([0, 2])
    opts = poptorch.Options().randomSeed(3)
    net = _Net()
    model = poptorch.trainingModel(net, opts, poptorch.optim.SGD(net.parameters(), lr=0.5, loss_scaling=2.0))
    path = str(tmp_path / "train.poptorch")
    model.compileAndExport(path, x, y)
    loaded = poptorch.load(path, edit_opts_fn=lambda o: o.deviceIterations(1))
    assert loaded.training and loaded.options.random_seed == 3 and loaded.optimizer.loss_scaling == 2.0
    first = float(loaded(x, y)[1])
    for _ in range(20):
        last = float(loaded(x, y)[1])
    assert last < first
    # the loaded model's weights are its own: the exported model is untouched
    assert not torch.equal(loaded.model.fc.weight, model.model.fc.weight)
    inference = poptorch.inferenceModel(loaded)  # an executor's own model, as PopTorch takes it
    assert inference.model is loaded.model and inference(x).shape == (2, 3)


def test_files_without_a_model_and_of_the_other_kind(tmp_path):
    path = str(tmp_path / "infer.poptorch")
    poptorch.inferenceModel(_Net()).compileAndExport(path, torch.randn(1, 4), export_model=False)
    with pytest.raises(poptorch.Error, match="export_model=False: build the model in Python and call loadExecutable"):
        poptorch.load(path)
    poptorch.inferenceModel(_Net()).loadExecutable(path)
    with pytest.raises(poptorch.Error, match="holds an inference executable; this model is a training model"):
        poptorch.trainingModel(_Net()).loadExecutable(path)
    (tmp_path / "junk").write_text("not an executable")
    with pytest.raises(poptorch.Error, match="is not a PopTorch executable"):
        poptorch.load(str(tmp_path / "junk"))


def test_a_folder_gets_model_poptorch_and_a_missing_folder_is_made(tmp_path, capfd):
    model = poptorch.inferenceModel(_Net())
    model.compileAndExport(str(tmp_path), torch.randn(1, 4), export_model=False)
    assert [p.name for p in tmp_path.iterdir()] == ["model.poptorch"]
    assert "is a directory, saving model to" in capfd.readouterr().err
    model.save(str(tmp_path / "new" / "deeper" / "m.poptorch"))
    assert (tmp_path / "new" / "deeper" / "m.poptorch").is_file()


def test_compiled_offline_then_loaded_to_run(tmp_path):
    path = str(tmp_path / "offline.poptorch")
    x = torch.randn(2, 4)
    offline = poptorch.inferenceModel(_Net(), poptorch.Options().useOfflineIpuTarget())
    offline.compileAndExport(path, x)
    with pytest.raises(AssertionError, match="offline device"):
        offline(x)
    assert poptorch.load(path)(x).shape == (2, 3)
