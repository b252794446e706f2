"""``python -m ipuexp.poptorch`` on a script it cannot run as asked: a bad option value, a training model without a
scalar loss, a model that does not fit under ``report.fail_on_oom``, a run folder or store it cannot write. Each
is one line (a ``config error`` naming the call or key, the value and what is allowed), before the work it would
spoil."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ipuexp.poptorch as poptorch
from ipuexp.config.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

MODEL = """
import torch
import poptorch


class Net(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = torch.nn.Linear(width, width)

    def forward(self, x):
        return {output}


net = Net({width})
opts = poptorch.Options()
{options}
model = poptorch.trainingModel(net, opts, optimizer=poptorch.optim.Adam(net.parameters(), lr=1e-3))
model(torch.zeros(4, {width}))
print("the script went on")
"""


def _script(tmp_path: Path, options: str = "", output: str = "self.proj(x).pow(2).mean()", width: int = 8
            ) -> Path:
    path = tmp_path / "train.py"
    path.write_text(MODEL.format(options=options, output=output, width=width))
    return path


def _command(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="100", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "ipuexp.poptorch", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("call, line", [
    (lambda o: o.replicationFactor(0), "Options.replicationFactor=0 is invalid: allowed: an integer >= 1 "
                                        "(options.replication_factor)"),
    (lambda o: o.deviceIterations(-4), "Options.deviceIterations=-4 is invalid: allowed: an integer >= 1 "
                                        "(options.device_iterations)"),
    (lambda o: o.Training.gradientAccumulation(0), "Training.gradientAccumulation=0 is invalid: allowed: an "
                                                    "integer >= 1 (options.gradient_accumulation)"),
    (lambda o: o.deviceIterations(2.5), "Options.deviceIterations=2.5 is invalid"),
    (lambda o: o.outputMode(7), "Options.outputMode=7 is invalid: allowed: OutputMode.Final, EveryN, All, Sum, "
                                "Default"),
])
def test_an_option_value_is_refused_as_it_is_set(call, line):
    with pytest.raises(ConfigError) as err:
        call(poptorch.Options())
    assert str(err.value).startswith(line)
    assert poptorch.Options().deviceIterations(4.0).device_iterations == 4  # a whole number as a float is one


def test_a_bad_option_in_a_script_is_one_line_before_the_compile(tmp_path):
    proc = _command(str(_script(tmp_path, "opts.replicationFactor(0)")), "--", "tracking.enabled=false",
                    "hydra.run.dir=run", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip() == ("ipuexp: config error: Options.replicationFactor=0 is invalid: allowed: an "
                                   "integer >= 1 (options.replication_factor)")
    assert "the script went on" not in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]  # no run folder left behind


def test_a_training_model_without_a_scalar_loss_is_one_line(tmp_path):
    proc = _command(str(_script(tmp_path, output="self.proj(x)")), "--", "tracking.enabled=false",
                    "hydra.run.dir=run", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip() == ("ipuexp.poptorch: a training model without a scalar loss among its outputs is "
                                   "not supported; supported: a model returning its loss (a scalar, or "
                                   "poptorch.identity_loss(...)), alone or in a tuple")
    assert not (tmp_path / "run").exists()


def test_a_model_that_does_not_fit_exits_3_under_fail_on_oom(tmp_path):
    """Adam's weights, gradients and two state tensors of a 10,000 x 10,000 layer take 1.5 GiB: more than a
    Mk2's 900 MiB."""
    script = str(_script(tmp_path, width=10000))
    proc = _command(script, "--", "tracking.enabled=false", "report.fail_on_oom=true",
                    "hydra.run.dir=run", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == ("ipuexp.poptorch: train.py stopped at its prediction: the "
                                                    "model does not fit in IPU memory (report.fail_on_oom=true)")
    assert "the script went on" not in proc.stdout and (tmp_path / "run" / "result.json").is_file()


def test_where_the_job_writes_is_checked_before_the_script_runs(tmp_path):
    script = str(_script(tmp_path))
    (tmp_path / "a_file").write_text("")
    proc = _command(script, "--", "tracking.enabled=false", f"hydra.run.dir={tmp_path / 'a_file' / 'run'}",
                    cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-2000:]
    assert proc.stderr.startswith(f"ipuexp: config error: hydra.run.dir='{tmp_path / 'a_file' / 'run'}' is invalid")
    (tmp_path / "broken.db").write_bytes(b"not a database at all, but long enough")
    proc = _command(script, "--", "tracking.uri=sqlite:///broken.db", "hydra.run.dir=run", cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-2000:]
    assert proc.stderr.startswith("ipuexp: config error: tracking.uri='sqlite:///broken.db' is invalid")
    assert "the script went on" not in proc.stdout and not (tmp_path / "run").exists()
