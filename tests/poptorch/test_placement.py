"""Where blocks go: by ipu_id (AutoStage SameAsIpu, the default), one stage per block (AutoIncrement), PopTorch's three
annotations (BeginBlock, Block, BlockFunction)."""
from __future__ import annotations

import pytest
import torch

import ipuexp.poptorch as poptorch

from tests.poptorch.helpers import SCRIPTS, run_script

AUTOSTAGE = SCRIPTS / "autostage.py"


@pytest.mark.parametrize("args, layers, mapping", [
    ([], [1, 1, 2, 1], None),
    (["--auto-increment"], [1, 1, 1, 1, 1], [0, 1, 2, 2, 3]),
])
def test_blocks_by_ipu_id(tmp_path, capsys, caplog, args, layers, mapping):
    job = run_script(AUTOSTAGE, args, ["tracking.enabled=false"], tmp_path)
    pipeline = job.cfg.options.pipeline
    assert list(pipeline.layers_per_ipu) == layers
    assert (list(pipeline.device_mapping) if pipeline.device_mapping is not None else None) == mapping
    assert [b.name for b in job.graph.blocks] == ["embed", "hidden", "more", "most", "head"]
    assert job.cfg.options.replication_factor == 2 and job.cfg.options.loss_scaling == 128.0
    assert job.cfg.optimizer.name.value == "sgd_momentum"
    out = capsys.readouterr()
    # OutputMode.Default in training is Final: the last micro-batch of each replica
    assert "call 1: logits (8, 4) loss (2,)" in out.out
    assert "these change nothing ipuexp predicts: Jit.traceModel, logDir" in caplog.text
    assert len(job.result.memory.ipus) == 4
    assert job.result.functional.steps == 4  # 2 calls x 2 device iterations


def test_module_repr_shows_the_begin_blocks():
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Sequential())
    assert poptorch.module_repr(model) == repr(model)
    poptorch.BeginBlock(model[1], user_id="B1", ipu_id=1)
    shown = poptorch.module_repr(model)
    assert "(1): BeginBlock(user_id=B1, ipu_id=1) ReLU()" in shown
    assert repr(poptorch.inferenceModel(model)) == shown
    block = poptorch.BeginBlock(abs, "B2", 3)  # a function: the legacy form
    assert (block._user_id, block._ipu_id, block(-2)) == ("B2", 3, 2)
