"""A ``model.target`` that cannot give a model is the pre-flight check's one line with exit code 2, before Hydra
starts the job and with nothing written: a missing module or function, a module that does not compile, a factory
that raises or returns something else, and a target given without ``model.name=custom``."""
from __future__ import annotations

import os

import pytest

from tests.test_cli import run_cli

MODULE = """
import torch


def raises():
    raise RuntimeError("no weights here")


def plain():
    return torch.nn.Linear(2, 2)
"""

BASE = ["system=pod4", "data.micro_batch_size=4", "options.gradient_accumulation=16", "tracking.enabled=false",
        "hydra.run.dir=run"]


@pytest.mark.parametrize("target, says", [
    ("no_such_module_xyz:build", "cannot be imported (No module named 'no_such_module_xyz')"),
    ("factories:missing", "module factories has no callable 'missing'"),
    ("syntax_error:build", "cannot be imported (SyntaxError: "),
    ("factories:raises", "raised RuntimeError: no weights here"),
    ("factories:plain", "returned Linear"),
])
def test_a_target_that_gives_no_model_is_one_line(tmp_path, target, says):
    (tmp_path / "factories.py").write_text(MODULE)
    (tmp_path / "syntax_error.py").write_text("def build(:\n    pass\n")
    proc = run_cli("model.name=custom", f"model.target={target}", *BASE, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[0].startswith(f"ipuexp: config error: model.target='{target}' is invalid: "), lines[0]
    assert says in lines[0] and "allowed: " in lines[0], lines[0]
    assert not (tmp_path / "run").exists()


def test_a_target_without_model_name_custom_is_refused(tmp_path):
    """Ignoring it would predict the recipe's model (BERT-Large) as if it were the user's."""
    proc = run_cli("+recipe=bert_large", "model.target=my_model:build", "hydra.run.dir=run", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("ipuexp: config error: model.target='my_model:build' is invalid: allowed: null "
                                   "with model.name=bert; add model.name=custom to build the model it names")
    assert not (tmp_path / "run").exists()


def test_a_target_whose_import_never_returns_is_an_error_not_a_hang(tmp_path, monkeypatch):
    import time

    import ipuexp.models as models
    from ipuexp.config.schema import ModelConfig

    (tmp_path / "forever.py").write_text("while True:\n    pass\n")
    (tmp_path / "asks.py").write_text("def build():\n    return input('width? ')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(models, "TARGET_SECONDS", 1.0)
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"^model\.target: 'forever:build' cannot be imported \(importing forever "
                                         r"did not return within 1 s\)"):
        models.build_model(ModelConfig(name="custom", target="forever:build"))
    assert time.monotonic() - start < 10
    read, write = os.pipe()  # a terminal that never answers
    with open(read) as silent:
        monkeypatch.setattr("sys.stdin", silent)
        with pytest.raises(ValueError, match=r"raised TimeoutError: asks:build\(\) did not return within 1 s"):
            models.build_model(ModelConfig(name="custom", target="asks:build"))
    os.close(write)


def test_a_custom_model_is_named_by_its_module_not_the_zoos_default_variant():
    from ipuexp.calibration import family
    from ipuexp.models.spec import ModelConfig, model_label

    assert model_label(ModelConfig(name="custom", target="examples.mlp_classifier:build")) == "custom:mlp_classifier"
    assert model_label(ModelConfig(name="custom", target="my_model.build")) == "custom:my_model"
    # a user's model name is its own family; a Transformers name's first hyphenated word is its family
    assert family("tiny_model") == "tiny_model" and family("hf:t5-small") == "t5" and family("bert_large") == "bert"
