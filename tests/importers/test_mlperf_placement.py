"""The MLPerf BERT importer's pipeline placement (``att_ffn_placement``, ``encoder_start_pipeline_stage``): an index
below 0 is refused on one line and writes nothing; the comment beside what it writes describes that placement."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ipuexp.config.errors import ConfigError
from ipuexp.config.user_recipes import ENV_VAR
from ipuexp.importers import read
from published import DATA

ROOT = Path(__file__).resolve().parents[2]
SOURCE = DATA / "graphcore-configs" / "mlperf" / "v1.1_bert_popart_pod16-closed.json"


def _variant(tmp_path: Path, **changes) -> Path:
    cfg = json.loads(SOURCE.read_text())
    cfg.update(changes)
    path = tmp_path / "variant.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("changes,key", [
    ({"encoder_start_pipeline_stage": -1}, "encoder_start_pipeline_stage=-1"),
    ({"att_ffn_placement": [[-1, [7, 6]], [2, [6, 7]], [3, [7, 6]], [0, [4, 5]]]}, "att_ffn_placement="),
    ({"att_ffn_placement": [[1, [7, -6]], [2, [6, 7]], [3, [7, 6]], [0, [4, 5]]]}, "att_ffn_placement="),
])
def test_a_negative_index_is_refused_on_one_line(tmp_path, changes, key):
    path = _variant(tmp_path, **changes)
    with pytest.raises(ConfigError) as err:
        read(path)
    assert key in str(err.value) and "\n" not in str(err.value)
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{ENV_VAR: str(tmp_path / "recipes")})
    proc = subprocess.run([sys.executable, "-m", "ipuexp.recipes", "import", str(path), "--name", "neg"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert key in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "recipes").exists() or not list((tmp_path / "recipes").iterdir())


@pytest.mark.parametrize("last_ipu,start", [(0, 1), (3, 1), (0, 0)])
def test_the_comment_describes_the_placement_written(tmp_path, last_ipu, start):
    placement = [[1, [7, 6]], [2, [6, 7]], [3, [7, 6]], [last_ipu, [4, 5]]]
    if start == 0:
        placement = [[0, [7, 6]], [1, [6, 7]], [2, [7, 6]], [3, [4, 5]]]
    cfg = json.loads(SOURCE.read_text())
    layers = cfg.get("num_layers", 24)
    if sum(a + f for _, (a, f) in placement) != 2 * layers:
        pytest.skip("the placement does not cover this file's layers")
    from ipuexp.importers.recipe import write

    os.environ[ENV_VAR] = str(tmp_path / "recipes")
    try:
        path, _ = write(read(_variant(tmp_path, att_ffn_placement=placement, encoder_start_pipeline_stage=start)),
                        "placed", overwrite=True)
    finally:
        os.environ.pop(ENV_VAR)
    text = Path(path).read_text()
    mapping = next(line for line in text.splitlines() if "device_mapping" in line)
    lpi = next(line for line in text.splitlines() if "layers_per_ipu" in line)
    written = OmegaConf.load(path)
    ipus = list(OmegaConf.select(written, "options.pipeline.device_mapping"))
    assert ipus[-1] == placement[-1][0]
    assert f"heads in the last stage, on IPU {ipus[-1]}" in mapping
    assert ("the embedding's" in mapping) == (ipus[-1] == 0)
    if start:
        assert "the embedding alone first, on IPU 0" in lpi
        assert list(OmegaConf.select(written, "options.pipeline.layers_per_ipu"))[:start] == [0] * start
    else:
        assert "the embedding in the first stage" in lpi


def test_a_negative_ipu_of_a_named_stage_placement_is_refused():
    from ipuexp.importers.mapping import stages_of_names

    stages = [["emb", "hid"], ["hid", "hid"], ["mlm", "nsp"]]
    assert stages_of_names("pipeline_stages", stages, [0, 1, 0], "hid", ["emb"], ["mlm", "nsp"]) == ([1, 2], [0, 1, 0])
    with pytest.raises(ConfigError, match=r"device_mapping=\[0, -1, 0\] is invalid: allowed: one IPU index >= 0"):
        stages_of_names("pipeline_stages", stages, [0, -1, 0], "hid", ["emb"], ["mlm", "nsp"])


def test_a_negative_ipu_of_a_tensorflow2_cnn_placement_is_refused(tmp_path):
    import yaml

    source = DATA / "graphcore-configs" / "examples" / "HEAD_vision_cnns_tensorflow2_configs.yml"
    configs = yaml.safe_load(source.read_text())
    name = "resnet50_mlperf_pod16_bs20"  # Graphcore's MLPerf ResNet-50 on TensorFlow 2
    mapping = list(configs[name]["device-mapping"])
    read(source, name)  # as published: imports
    configs[name]["device-mapping"] = [-2] + mapping[1:]
    path = tmp_path / source.name
    path.write_text(yaml.safe_dump(configs))
    with pytest.raises(ConfigError, match=r"device-mapping=\[-2, .* is invalid: allowed: one IPU index >= 0"):
        read(path, name)
