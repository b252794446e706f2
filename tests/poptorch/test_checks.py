"""PopTorch's own errors as ipuexp.poptorch raises them (poptorch.Error with PopTorch's message), the output shapes
PopTorch returns, the capture of ops before the first block, and the public names PopTorch scripts and tests use."""
from __future__ import annotations

from typing import Any, Iterator

import pytest
import torch

import ipuexp.poptorch as poptorch
from ipuexp.poptorch.session import Session, session


@pytest.fixture
def job(tmp_path: Any) -> Iterator[Session]:
    """A job whose model is already predicted: the calls compute their numerics only."""
    s = Session(None, [], tmp_path)
    s.predicted = True
    with session(s):
        yield s


class _Pipelined(torch.nn.Module):
    """Two blocks on two IPUs; ``outside``: an op after the last ``with Block``."""

    def __init__(self, outside: bool = False) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
        self.outside = outside

    def forward(self, x: torch.Tensor) -> Any:
        x = x.view(-1, 4)  # before the first block: it joins that block
        with poptorch.Block("A", ipu_id=0):
            h = self.a(x)
        with poptorch.Block("B", ipu_id=1):
            out = self.b(h)
        if self.outside:
            out = out * 2
        return out


def test_ops_before_the_first_block_join_it():
    from ipuexp.poptorch.capture import split_model

    split = split_model(_Pipelined(), (torch.randn(8, 2, 2),), {}, 4, False, "m")
    assert split.names == ["A", "B"] and split.ipu_ids == [0, 1]


def test_an_op_outside_any_block_is_popart_s_error(job):
    model = poptorch.inferenceModel(_Pipelined(outside=True), poptorch.Options().deviceIterations(2))
    with pytest.raises(poptorch.Error, match="No active Block, all the ops must belong to a Block"):
        model(torch.randn(4, 4))
    assert poptorch.inferenceModel(_Pipelined(), poptorch.Options().deviceIterations(2))(torch.randn(4, 4)).shape \
        == (4, 1)


def test_too_few_micro_batches_for_the_pipeline_stages(job):
    class Loss(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = _Pipelined()

        def forward(self, x):
            out = self.m(x)
            with poptorch.Block("B", ipu_id=1):
                return out, poptorch.identity_loss(out, reduction="mean")

    opts = poptorch.Options()
    opts.Training.gradientAccumulation(2)
    with pytest.raises(poptorch.Error, match=r"gradientAccumulation must be greater than or equal to the number of "
                                             r"pipeline stages \(3\)"):
        poptorch.trainingModel(Loss(), opts)(torch.randn(2, 4))
    opts = poptorch.Options()  # a model's options are frozen, as PopTorch's are
    opts.Training.gradientAccumulation(3)
    poptorch.trainingModel(Loss(), opts)(torch.randn(3, 4))
    with pytest.raises(poptorch.Error, match=r"deviceIterations must be greater than or equal to the number of "
                                             r"pipeline stages \(2\)"):
        poptorch.inferenceModel(_Pipelined())(torch.randn(2, 4))


def test_inputs_that_change_after_compile(job):
    model = poptorch.inferenceModel(torch.nn.Linear(4, 2))
    model(torch.randn(3, 4))
    with pytest.raises(poptorch.Error, match="Data type mismatch for input: expected torch.float32 but got "
                                             "torch.float16"):
        model(torch.randn(3, 4).half())
    with pytest.raises(poptorch.Error, match=r"Shape mismatch for input: expected torch.Size\(\[3, 4\]\) but got "
                                             r"torch.Size\(\[3, 5\]\)"):
        model(torch.randn(3, 5))
    model.destroy()
    assert model(torch.randn(2, 4)).shape == (2, 2)  # destroy(): compiled again for the new inputs


@pytest.mark.parametrize("mode", [poptorch.OutputMode.Final, poptorch.OutputMode.Sum, poptorch.OutputMode.Default])
def test_a_scalar_loss_of_one_replica_is_a_scalar(job, mode):
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 2)

        def forward(self, x):
            out = self.lin(x)
            return out, out.pow(2).mean()

    opts = poptorch.Options().deviceIterations(3).outputMode(mode)
    out, loss = poptorch.trainingModel(Model(), opts)(torch.randn(6, 4))
    assert loss.shape == () and out.shape == (2, 2)
    out, loss = poptorch.trainingModel(Model(), opts.clone().replicationFactor(2))(torch.randn(12, 4))
    assert loss.shape == (2,)


def test_is_running_on_ipu_hooks_and_overlap(job):
    seen = []

    class Model(torch.nn.Module):
        def forward(self, x):
            x = poptorch.set_overlap_for_input(x, poptorch.OverlapMode.OverlapAccumulationLoop)
            seen.append(poptorch.isRunningOnIpu())
            return x * 2

    pre = poptorch.registerPreCompileHook(lambda: seen.append("pre"))
    post = poptorch.registerPostCompileHook(lambda: seen.append("post"))
    try:
        opts = poptorch.Options().setExecutionStrategy(poptorch.ShardedExecution())  # what overlapped IO needs
        opts.TensorLocations.numIOTiles(32)
        model = poptorch.inferenceModel(Model(), opts)
        torch.testing.assert_close(model(torch.ones(2)), torch.full((2,), 2.0))
    finally:
        pre.remove()
        post.remove()
    Model()(torch.ones(2))
    assert seen == ["pre", "post", True, False]
    with pytest.raises(RuntimeError, match="Pre-compile hook must be callable"):
        poptorch.registerPreCompileHook(3)


def test_a_custom_argument_parser(job):
    class Pair:
        def __init__(self, a: torch.Tensor, b: torch.Tensor) -> None:
            self.a, self.b = a, b

    class Parser(poptorch.ICustomArgParser):
        def yieldTensors(self, struct):
            yield struct.a
            yield struct.b

        def reconstruct(self, original_structure, tensor_iterator):
            return Pair(next(tensor_iterator), next(tensor_iterator))

    class Model(torch.nn.Module):
        def forward(self, pair):
            return pair.a + pair.b

    poptorch.registerCustomArgParser(Pair, Parser())
    try:
        model = poptorch.inferenceModel(Model(), poptorch.Options().deviceIterations(2))
        torch.testing.assert_close(model(Pair(torch.ones(4, 3), torch.ones(4, 3))), torch.full((4, 3), 2.0))
    finally:
        poptorch.registerCustomArgParser(Pair, None)
    with pytest.raises(poptorch.Error, match="must inherit from ICustomArgParser"):
        poptorch.registerCustomArgParser(Pair, object())


def test_three_ipus_are_popart_s_error_unless_rounded(tmp_path, capsys):
    class Three(torch.nn.Module):
        def forward(self, x):
            for i in range(3):
                with poptorch.Block(f"B{i}", ipu_id=i):
                    x = x * 2
            return x

    opts = poptorch.Options().deviceIterations(3)
    with session(Session(None, ["system=pod4"], tmp_path, predict_only=True)):
        with pytest.raises(poptorch.Error, match="The model specifies the use of 3 IPUs, however PopTorch must "
                                                 "reserve a minimum of 4"):
            poptorch.inferenceModel(Three(), opts)(torch.randn(3, 2))
    # autoRoundNumIPUs(True): PopTorch reserves 4 IPUs and runs the model on 3 of them
    job = Session(None, ["system=pod4", "tracking.enabled=false"], tmp_path / "rounded")
    with session(job):
        out = poptorch.inferenceModel(Three(), opts.clone().autoRoundNumIPUs(True))(torch.randn(3, 2))
    assert out.shape == (3, 2) and job.cfg.options.auto_round_num_ipus is True
    assert list(job.cfg.options.pipeline.layers_per_ipu) == [1, 1, 1] and len(job.result.memory.ipus) == 3
    assert job.result.run.ipus_used == 3 and job.result.run.ipus_reserved == 4
    assert "IPUs used 3 of 4 (pod4); 4 reserved (options.auto_round_num_ipus): 1 of them stays idle" in \
        " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("enabled", [True, False])
def test_floating_point_exceptions(job, enabled):
    class Div(torch.nn.Module):
        def forward(self, x, y):
            return x / y

    opts = poptorch.Options()
    opts.Precision.enableFloatingPointExceptions(enabled)
    model = poptorch.inferenceModel(Div(), opts)
    if enabled:
        with pytest.raises(poptorch.Error, match="Floating point exception"):
            model(torch.ones(2, 2), torch.zeros(2, 2))
    else:
        assert torch.isinf(model(torch.ones(2, 2), torch.zeros(2, 2))).all()


def test_comparing_a_nan_is_an_invalid_operation(job):
    class Greater(torch.nn.Module):
        def forward(self, x, y):
            return x > y

    opts = poptorch.Options()
    opts.Precision.enableFloatingPointExceptions(True)
    nan = torch.full((2, 2), float("nan"))
    with pytest.raises(poptorch.Error, match="gt compared a NaN"):
        poptorch.inferenceModel(Greater(), opts)(torch.ones(2, 2), nan)
    assert not poptorch.inferenceModel(Greater())(torch.ones(2, 2), nan).any()


def test_the_loss_scale_is_set_on_the_optimizer(job):
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(2, 1)

        def forward(self, x):
            return self.lin(x).mean()

    model = Model()
    optimizer = poptorch.optim.SGD(model.parameters(), lr=0.1, loss_scaling=1.0)
    training = poptorch.trainingModel(model, optimizer=optimizer)
    training(torch.ones(1, 2))
    optimizer.loss_scaling = 2.0
    training.setOptimizer(optimizer)
    assert training.optimizer.loss_scaling == 2.0
    training(torch.ones(1, 2))


def test_a_missing_dict_key_is_named(job):
    class Divider(torch.nn.Module):
        def forward(self, d):
            return d["x"] / d["y"]

    model = poptorch.inferenceModel(Divider())
    model({"x": torch.tensor([1.0]), "y": torch.tensor([2.0])})
    model({"y": torch.tensor([2.0]), "x": torch.tensor([1.0])})  # the order of the keys does not matter
    with pytest.raises(poptorch.Error, match="Missing arguments: x."):
        model({"y": torch.tensor([2.0])})
    with pytest.raises(poptorch.Error, match="Unexpected arguments: z."):
        model({"x": torch.tensor([1.0]), "y": torch.tensor([2.0]), "z": torch.tensor([3.0])})


def test_left_out_arguments_are_their_defaults_and_constants_are_compiled_in(job):
    """PopTorch's ArgsParser fills a left-out parameter with its default: a call may then pass it (same type and
    shape); a left-out tensor input is None against a compiled tensor, and a non-tensor input is a constant."""
    class Adder(torch.nn.Module):
        def forward(self, a, b=torch.zeros(2), *, scale=2, c=None):
            out = (a + b) * scale
            return out if c is None else out + c

    model = poptorch.inferenceModel(Adder())
    one = torch.ones(2)
    torch.testing.assert_close(model(one), torch.full((2,), 2.0))
    torch.testing.assert_close(model(one, b=one), torch.full((2,), 4.0))
    with pytest.raises(poptorch.Error, match="Value mismatch for scale: expected 2 but got 3"):
        model(one, scale=3)
    with pytest.raises(poptorch.Error, match="Type mismatch for c: expected <class 'NoneType'>"):
        model(one, c=one)


def test_a_zero_sized_input_is_refused():
    with pytest.raises(poptorch.Error, match=r"Zero-sized tensors are unsupported \(Got shape \[0, 2\]\)"):
        poptorch.inferenceModel(torch.nn.Linear(2, 2))(torch.randn(0, 2))


def test_log_levels_are_poptorch_s():
    for level in (0, 1, 2, 3, 4, "TRACE", "DEBUG", "INFO", "ERR", "OFF", "WARN"):
        poptorch.setLogLevel(level)
    with pytest.raises(ValueError, match="Invalid log level integer"):
        poptorch.setLogLevel(5)
    with pytest.raises(ValueError, match="Unknown log level: loud. Valid values are DEBUG, ERR, INFO, OFF, TRACE and "
                                         "WARN"):
        poptorch.setLogLevel("loud")


def test_one_process_drives_64_ipus_at_most(job):
    with pytest.raises(poptorch.Error, match=r"Too many IPUs requested \(128\)"):
        poptorch.inferenceModel(torch.nn.Linear(2, 2), poptorch.Options().replicationFactor(128))(torch.ones(128, 2))
