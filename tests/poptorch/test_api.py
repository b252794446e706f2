"""PopTorch's API as ipuexp.poptorch gives it: Options and their chaining, DataLoader batches, output modes, the
optimizers' extra arguments, and the command's one-line errors."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import ipuexp.poptorch as poptorch
from ipuexp.poptorch.session import Session, session
from tests.poptorch.helpers import SCRIPTS

ROOT = Path(__file__).resolve().parents[2]


def test_options_chain_and_clone():
    opts = poptorch.Options()
    assert opts.deviceIterations(4).replicationFactor(2).randomSeed(7) is opts
    assert opts.Training.gradientAccumulation(8).setAutomaticLossScaling(True) is opts.Training
    opts.Precision.setPartialsType(torch.half).enableStochasticRounding(True)
    opts.TensorLocations.setOptimizerLocation(poptorch.TensorLocationSettings().useOnChipStorage(False)
                                              .useReplicatedTensorSharding(True)).numIOTiles(32)
    copy = opts.clone()
    copy.Training.gradientAccumulation(1)
    assert opts.Training.gradient_accumulation == 8 and copy.Training.gradient_accumulation == 1
    from ipuexp.poptorch.mapping import options_values

    v = options_values(opts, training=True).values
    assert v["options.gradient_accumulation"] == 8 and v["options.replication_factor"] == 2
    assert v["options.partials_type"] == "half" and v["options.stochastic_rounding"] is True
    assert v["options.tensor_locations.optimizer_state.on_chip"] is False
    assert v["options.tensor_locations.optimizer_state.replicated_tensor_sharding"] is True
    assert v["options.io.num_io_tiles"] == 32 and v["options.auto_loss_scaling"] is True


def test_unsupported_options_say_what_is_supported():
    with pytest.raises(poptorch.UnsupportedError, match=r"^Options.inputReplicaGrouping is not supported; "):
        poptorch.Options().inputReplicaGrouping(2)
    with pytest.raises(poptorch.UnsupportedError, match="PipelinedExecution, ShardedExecution"):
        poptorch.SerialPhasedExecution("B1")


def test_dataloader_combined_batch_and_drop_last(caplog):
    opts = poptorch.Options().deviceIterations(3).replicationFactor(2)
    opts.Training.gradientAccumulation(5)
    data = torch.utils.data.TensorDataset(torch.arange(1000.0))
    loader = poptorch.DataLoader(opts, data, batch_size=4)
    assert loader.combinedBatchSize == 4 * 3 * 5 * 2
    assert [len(b[0]) for b in loader] == [120] * 8  # 1000 // 120, the incomplete batch dropped
    with caplog.at_level(logging.WARNING):
        kept = poptorch.DataLoader(opts, data, batch_size=4, drop_last=False)
    assert "The last tensor will have a batch size of 40" in caplog.text
    assert [len(b[0]) for b in kept][-1] == 40


class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x, y):
        out = x * self.w
        return out, ((out - y) ** 2).mean()


@pytest.mark.parametrize("mode, shapes", [
    (poptorch.OutputMode.All, ((2 * 2 * 3 * 4, 3), (2 * 2 * 3,))),
    (poptorch.OutputMode.Final, ((2 * 4, 3), (2,))),
    (poptorch.OutputMode.Sum, ((2 * 4, 3), (2,))),
])
def test_output_modes(tmp_path, mode, shapes):
    """What a training call returns: all micro-batches, the last of each replica, or their sum per replica."""
    opts = poptorch.Options().deviceIterations(2).replicationFactor(2).outputMode(mode)
    opts.Training.gradientAccumulation(3)
    model = _Scaled()
    job = Session(None, [], tmp_path)
    job.predicted = True  # numerics only
    with session(job):
        training = poptorch.trainingModel(model, opts, poptorch.optim.SGD(model.parameters(), lr=0.1))
        out, loss = training(torch.randn(48, 3), torch.randn(48, 3))
    assert (tuple(out.shape), tuple(loss.shape)) == shapes
    assert job.steps == 2  # one update per device iteration


def test_mean_reduction_and_loss_scaling_give_sgds_step(tmp_path):
    """One device iteration of 2 replicas x 3 micro-batches: one SGD step on the mean gradient, loss scale undone."""
    opts = poptorch.Options().replicationFactor(2)
    opts.Training.gradientAccumulation(3)
    x, y = torch.randn(12, 3), torch.randn(12, 3)
    reference = _Scaled()
    grads = []
    for i in range(6):
        reference.zero_grad()
        reference(x[2 * i:2 * i + 2], y[2 * i:2 * i + 2])[1].backward()
        grads.append(reference.w.grad.clone())
    expected = reference.w.detach() - 0.1 * torch.stack(grads).mean(0)
    model = _Scaled()
    job = Session(None, [], tmp_path)
    job.predicted = True
    with session(job):
        poptorch.trainingModel(model, opts, poptorch.optim.SGD(model.parameters(), lr=0.1, loss_scaling=1024.0))(x, y)
    torch.testing.assert_close(model.w.detach(), expected)


def test_inference_model_returns_all_and_sees_training(tmp_path):
    model = _Scaled()
    opts = poptorch.Options().deviceIterations(4)
    job = Session(None, [], tmp_path)
    job.predicted = True
    with session(job):
        inference = poptorch.inferenceModel(model, opts)
        with torch.no_grad():
            model.w.mul_(2)
        out, loss = inference(torch.ones(8, 3), torch.zeros(8, 3))
    assert tuple(out.shape) == (8, 3) and tuple(loss.shape) == (4,) and float(out[0, 0]) == 2.0
    with pytest.raises(poptorch.Error, match="gradientAccumulation to 1"):
        bad = poptorch.Options()
        bad.Training.gradientAccumulation(2)
        poptorch.inferenceModel(model, bad)


def _command(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="100", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "ipuexp.poptorch", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_unsupported_api_is_one_line(tmp_path):
    proc = _command(str(SCRIPTS / "phased.py"), "--", "tracking.enabled=false", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("ipuexp.poptorch: poptorch.SerialPhasedExecution is not supported; supported: "
                                   "PipelinedExecution, ShardedExecution")


def test_script_error_is_the_scripts_traceback(tmp_path):
    proc = _command(str(SCRIPTS / "broken.py"), "--", "tracking.enabled=false", cwd=tmp_path)
    assert proc.returncode == 1
    assert "broken.py\", line 13, in forward" in proc.stderr and "RuntimeError: shape '[-1, 5]'" in proc.stderr
    # no frame of ipuexp's own code (by the package's folder: a clone's folder is itself often named ipuexp)
    import ipuexp

    package = str(Path(ipuexp.__file__).resolve().parent) + "/"
    assert f'File "{package}' not in proc.stderr and "Error executing job" not in proc.stderr


def test_bad_override_is_one_line(tmp_path):
    """A key ipuexp does not have stops before the script runs; a value its rules refuse, at the prediction."""
    proc = _command(str(SCRIPTS / "phased.py"), "--", "options.gradient_acumulation=2", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("ipuexp: config error: options.gradient_acumulation")
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = _command(str(SCRIPTS / "autostage.py"), "--", "options.io.num_io_tiles=7", "tracking.enabled=false",
                    cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("ipuexp: config error: options.io.num_io_tiles=7 ")
    assert "Traceback" not in proc.stderr


def test_help_fits_80_columns_and_import_is_light():
    proc = _command("--help", cwd=ROOT)
    assert proc.returncode == 0 and "--predict-only" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    # The help and a usage error are answered before torch is imported: under a second.
    for args, status in ((["--system", "pod4", "--help"], 0), (["no_such_script.py"], 2)):
        code = ("import runpy, sys, time; t = time.perf_counter(); sys.argv = ['-m', *sys.argv[1:]]; sys.orig_argv = "
                "[sys.executable, '-m', 'ipuexp.poptorch', *sys.argv[1:]]\n"
                "try:\n    import ipuexp.poptorch\nexcept SystemExit as e:\n"
                "    print(e.code, 'torch' in sys.modules, time.perf_counter() - t)")
        out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                             timeout=120).stdout.split()
        assert out[-3:-1] == [str(status), "False"] and float(out[-1]) < 1.0, out
    code = ("import time, torch; t = time.perf_counter(); import ipuexp.poptorch; "
            "print(time.perf_counter() - t); import sys; "
            "print(sorted(m for m in ('hydra', 'mlflow', 'omegaconf', 'ray', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    seconds, heavy = out.stdout.splitlines()
    assert float(seconds) < 0.5 and heavy == "[]"


def test_import_as_poptorch_without_the_command(tmp_path):
    """``import ipuexp.poptorch as poptorch`` in a script run by python: the same job, its run FINISHED at exit."""
    source = (SCRIPTS / "autostage.py").read_text().replace("\nimport poptorch\n",
                                                             "\nimport ipuexp.poptorch as poptorch\n")
    (tmp_path / "plain.py").write_text(source)
    env = dict(os.environ, COLUMNS="100", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "plain.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Memory per IPU" in proc.stdout and "call 1: logits (8, 4) loss (2,)" in proc.stdout
    assert len(list(tmp_path.glob("outputs/poptorch/*/result.json"))) == 1
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.search_runs([client.get_experiment_by_name("plain").experiment_id])[0]
    assert run.info.status == "FINISHED"
    assert len(client.get_metric_history(run.info.run_id, "train_loss")) == 4


def test_executor_methods(tmp_path):
    """compile, setOptimizer (new learning rate, optimizer state kept), detachFromDevice, destroy."""
    model = _Scaled()
    opts = poptorch.Options()
    job = Session(None, [], tmp_path)
    job.predicted = True
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    with session(job):
        optimizer = poptorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        training = poptorch.trainingModel(model, opts, optimizer)
        assert not training.isAttachedToDevice()
        training.compile(x, y)
        assert training.isCompiled() and training.isAttachedToDevice()
        training(x, y)
        state = optimizer.state[model.w]["momentum_buffer"].clone()
        training.setOptimizer(poptorch.optim.SGD(model.parameters(), lr=0.0, momentum=0.9))
        assert optimizer.param_groups[0]["lr"] == 0.0
        before = model.w.detach().clone()
        training(x, y)  # lr 0: the weights stay; the momentum buffer, kept, moves on
        assert torch.equal(model.w.detach(), before)
        assert not torch.equal(optimizer.state[model.w]["momentum_buffer"], state)
        training.copyWeightsToHost()
        training.detachFromDevice()
        assert not training.isAttachedToDevice()
        with pytest.raises(poptorch.Error, match="Device is not attached"):
            training.detachFromDevice()
        training.attachToDevice()
        with pytest.raises(poptorch.Error, match="Device is already attached"):
            training.attachToDevice()
        offline = poptorch.inferenceModel(model, poptorch.Options().useOfflineIpuTarget())
        offline.compile(x, y)  # compiles for the offline target; runs nowhere
        with pytest.raises(AssertionError, match="Trying to run a model on an offline device"):
            offline(x, y)
        training.destroy()
        assert not training.isCompiled()
        assert training.w is model.w  # the wrapped model's attributes


class _Custom(torch.nn.Module):
    """A custom loss with identity_loss, a printed tensor and a recomputation checkpoint, in two blocks."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 1)

    def forward(self, x):
        with poptorch.Block("first", ipu_id=0):
            h = poptorch.recomputationCheckpoint(torch.relu(self.a(x)))
        with poptorch.Block("second", ipu_id=1):
            out = poptorch.ipu_print_tensor(self.b(h), "out")
            extra = out.detach().sum()  # a scalar output that is not the loss
            return out, extra, poptorch.identity_loss(out ** 2, reduction="mean")


def test_identity_loss_print_and_checkpoint(tmp_path, capsys):
    from ipuexp.poptorch.capture import split_model

    model = _Custom()
    x = torch.randn(8, 3)
    split = split_model(model, (x,), {}, 4, True, "custom")
    assert split.names == ["first", "second"] and split.ipu_ids == [0, 1] and split.checkpoints == 1
    assert capsys.readouterr().out == ""  # nothing printed while captured on meta tensors
    job = Session(None, [], tmp_path)
    job.predicted = True
    with session(job):
        opts = poptorch.Options().outputMode(poptorch.OutputMode.All)
        opts.setExecutionStrategy(poptorch.ShardedExecution())  # a 2-stage pipeline would accumulate 3 micro-batches
        out, extra, loss = poptorch.trainingModel(model, opts, poptorch.optim.SGD(model.parameters(), lr=0.1))(x[:4])
    expected = (out ** 2).mean()
    torch.testing.assert_close(loss, expected)  # one micro-batch's scalar, as PopTorch returns it
    assert capsys.readouterr().out.startswith("out: ")


def test_lamb_takes_poptorchs_arguments_on_the_engines_lamb():
    import torch

    import ipuexp.poptorch as poptorch
    from ipuexp.training.optim import lamb_class

    def stepped(**kwargs):
        torch.manual_seed(0)
        m = torch.nn.Linear(4, 2)
        opt = poptorch.optim.LAMB(m.parameters(), lr=0.1, **kwargs)
        m(torch.ones(3, 4)).sum().backward()
        opt.step()
        return m.weight.detach().clone(), opt

    plain, opt = stepped(loss_scaling=8.0)
    assert isinstance(opt, lamb_class().__mro__[1]) and opt.loss_scaling == 8.0
    no_bias, _ = stepped(bias_correction=False)
    clipped, _ = stepped(max_weight_norm=1e-3)
    assert not torch.allclose(plain, no_bias) and not torch.allclose(plain, clipped)


def test_the_report_starts_a_line_of_its_own_after_a_progress_bar(tmp_path):
    """A script that calls its model inside a tqdm loop, piped: the report does not start on the bar's last frame
    (which ends in a carriage return, not a newline)."""
    source = (SCRIPTS / "autostage.py").read_text()
    source = source.replace("for call, (x, y) in enumerate(loader):", "from tqdm import tqdm\n"
                            "for call, (x, y) in enumerate(tqdm(loader, file=sys.stdout)):")
    (tmp_path / "bar.py").write_text("import sys\n" + source)
    proc = _command("--predict-only", "bar.py", "--", "tracking.enabled=false", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.split("\n")  # a terminal's lines: \r does not end one
    said = next(line for line in lines if "the script's options as ipuexp overrides" in line)
    assert said.startswith("ipuexp.poptorch: the script's options"), said
