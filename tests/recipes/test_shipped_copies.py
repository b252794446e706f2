"""The README's import examples run from any folder: the files they name ship with ipuexp, unchanged copies of the
published files (the same as the test data's), read when the path given does not exist."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ipuexp.importers.shipped import SHIPPED, shipped_copy

DATA = Path(__file__).resolve().parents[1] / "data" / "graphcore-configs"
TEST_COPIES = {
    "nlp/bert/pytorch/configs_pretraining.yml": DATA / "examples" / "HEAD_nlp_bert_pytorch_configs_pretraining.yml",
    "applications/tensorflow/bert/configs/pretrain_large_384_phase2.json":
        DATA / "examples" / "187775b_applications_tensorflow_bert_configs_pretrain_large_384_phase2.json",
    "Graphcore/benchmarks/bert/implementations/popart/configs/pod16-closed.json":
        DATA / "mlperf" / "v1.1_bert_popart_pod16-closed.json",
}


@pytest.mark.parametrize("key", sorted(SHIPPED))
def test_shipped_copies_are_the_published_files(key):
    copy, locator = shipped_copy(key)
    assert copy.read_bytes() == TEST_COPIES[key].read_bytes()
    assert locator.endswith(key)


def test_a_path_is_matched_on_whole_components():
    assert shipped_copy("examples/nlp/bert/pytorch/configs_pretraining.yml") is not None
    assert shipped_copy("/home/me/examples/nlp/bert/pytorch/configs_pretraining.yml") is not None
    assert shipped_copy("xnlp/bert/pytorch/configs_pretraining.yml") is None
    assert shipped_copy("configs_pretraining.yml") is None


def test_import_from_an_empty_folder(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != "IPUEXP_RECIPE_DIR"}
    out = subprocess.run([sys.executable, "-m", "ipuexp.recipes", "import",
                          "examples/nlp/bert/pytorch/configs_pretraining.yml:pretrain_large_128_POD64", "--name",
                          "my_bert"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith("ipuexp.recipes: examples/nlp/bert/pytorch/configs_pretraining.yml is not here: "
                                 "reading ipuexp's copy of graphcore/examples@3cc8f81:")
    recipe = (tmp_path / "recipes" / "my_bert.yaml").read_text()
    assert "source: graphcore/examples@3cc8f81:nlp/bert/pytorch/configs_pretraining.yml#pretrain_large_128_POD64" \
        in recipe
    listed = subprocess.run([sys.executable, "-m", "ipuexp.recipes", "list",
                             "examples/nlp/bert/pytorch/configs_pretraining.yml"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0 and "pretrain_large_128_POD64" in listed.stdout.split()
