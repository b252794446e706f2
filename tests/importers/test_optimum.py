"""Optimum Graphcore ipu_config.json: IPUConfig's fields and defaults, repeated keys, per-POD-type values, the
run-time route (model.hf.ipu_config) and the converter."""
from __future__ import annotations

import subprocess
import sys

import pytest

from ipuexp.config.errors import ConfigError
from ipuexp.config import ipu_config as optimum
from ipuexp.config.user_recipes import ENV_VAR
from published import DATA

OPTIMUM = DATA / "optimum-graphcore"
LM = OPTIMUM / "language-modeling_ipu_config.json"
QA = OPTIMUM / "question-answering_roberta-large_ipu_config.json"
CONVNEXT = OPTIMUM / "image-classification_convnext_ipu_config.json"
MINIMAL = OPTIMUM / "tests_ipu_config_trainer_test.json"


def test_repeated_keys_keep_the_last_value_and_are_named_once():
    fields, warnings = optimum.read(LM)
    assert fields["replicated_tensor_sharding"] is True and fields["weight_decay"] == 0.01
    assert len(warnings) == 1 and "\n" not in warnings[0]
    for key in ("optimizer (the same value)", "weight_decay (0.0 then 0.01)", "replicated_tensor_sharding",
                "attention_probs_dropout_prob"):
        assert key in warnings[0]


@pytest.mark.parametrize("pod, replicas", [("pod4", 1), ("pod16", 8), ("pod64", 16), (None, 1)])
def test_replication_per_pod_type(pod, replicas):
    fields, _ = optimum.read(CONVNEXT)
    assert optimum.for_pod_type(fields, pod)["replication_factor"] == replicas


def test_fields_map_to_poptorch_options_and_unmodelled_fields_are_listed():
    fields, _ = optimum.read(QA)
    values, notes, unmodelled = optimum.options(fields, "pod16", 24, [0, 1, 2, 3, 0])
    assert values["options.replication_factor"] == 4 and values["options.gradient_accumulation"] == 32
    assert values["options.device_iterations"] == 4 and values["options.inference_device_iterations"] == 4
    assert values["options.available_memory_proportion"] == [0.1, 0.2, 0.25, 0.25]
    assert values["options.pipeline.layers_per_ipu"] == [3, 7, 7, 7]
    assert "options.pipeline.device_mapping" not in values  # the recipe's placement fits: kept
    assert values["options.embedding_serialization_factor"] == 3 and values["options.random_seed"] == 1984
    assert values["options.tensor_locations.optimizer_state.on_chip"] is False
    assert values["optimizer.state_precision"] == "half" and values["options.partials_type"] == "half"
    assert values["options.output_mode"] == "final"  # not given: IPUConfig's default
    assert "IPUConfig default" in notes["options.output_mode"]
    assert unmodelled == ["async_dataloader"]  # inference_replication_factor: the replicas of training=false


def test_defaults_are_ipuconfigs():
    fields, _ = optimum.read(MINIMAL)
    values, _, _ = optimum.options(fields, "pod16", 24, None)
    assert values["options.available_memory_proportion"] == 0.6 and values["options.output_mode"] == "all"
    assert values["options.replication_factor"] == 1
    assert "options.executable_cache_dir" not in values  # "disabled"


def test_wildcard_layers_share_the_rest_evenly():
    values, _, _ = optimum.options({"layers_per_ipu": [0, -1, -1, -1]}, None, 24, None)
    assert values["options.pipeline.layers_per_ipu"] == [0, 8, 8, 8]
    with pytest.raises(ConfigError, match="layers_per_ipu"):
        optimum.options({"layers_per_ipu": [1, -1, -1]}, None, 24, None)


def test_layers_that_disagree_with_ipus_per_replica_are_refused_in_one_line():
    fields, _ = optimum.read(CONVNEXT)
    with pytest.raises(ConfigError) as err:
        optimum.options(fields, "pod16", 16, None)
    assert str(err.value).startswith("layers_per_ipu=[6] is invalid") and "\n" not in str(err.value)


def test_run_time_file_overrides_the_recipe_and_the_command_line_wins(compose_config):
    cfg = compose_config(["+recipe=bert_large", f"model.hf.ipu_config={QA}"])
    assert cfg.options.gradient_accumulation == 32 and cfg.options.device_iterations == 4
    assert list(cfg.options.available_memory_proportion) == [0.1, 0.2, 0.25, 0.25]
    assert cfg.options.embedding_serialization_factor == 3
    cfg = compose_config(["+recipe=bert_large", f"model.hf.ipu_config={QA}", "options.gradient_accumulation=64"])
    assert cfg.options.gradient_accumulation == 64 and cfg.options.device_iterations == 4


def test_converter_writes_a_recipe_on_a_base(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    run = subprocess.run([sys.executable, "-m", "ipuexp.recipes", "import", str(LM), "--base", "bert_base",
                          "--name", "lm", "--source", "huggingface/optimum-graphcore@0806633:examples/"
                          "language-modeling/ipu_config.json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    text = (tmp_path / "lm.yaml").read_text()
    assert "- /recipe/bert_base" in text and "source: huggingface/optimum-graphcore@0806633" in text
    assert "replicated_tensor_sharding: true" in text
    warnings = [line for line in run.stderr.splitlines() if "not modelled" in line]
    assert len(warnings) == 1 and "lr_schedule" in warnings[0] and "dataloader_workers" in warnings[0]
    from ipuexp.config.compose import compose_recipe

    exp = compose_recipe("lm")
    assert exp.options.replication_factor == 2 and exp.options.gradient_accumulation == 16
    assert exp.options.device_iterations == 5 and exp.optimizer.learning_rate == 6e-5
    assert list(exp.options.pipeline.layers_per_ipu) == [0, 4, 4, 4]


def test_converter_refuses_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    run = subprocess.run([sys.executable, "-m", "ipuexp.recipes", "import", str(CONVNEXT), "--base", "resnet50",
                          "--name", "cnx"], capture_output=True, text=True)
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert "layers_per_ipu=[6] is invalid" in run.stderr and "Traceback" not in run.stderr
    run = subprocess.run([sys.executable, "-m", "ipuexp.recipes", "import", str(CONVNEXT), "--base", "resnet50",
                          "--name", "cnx", "--pod-type", "pod8"], capture_output=True, text=True)
    assert run.returncode == 2 and "pod_type='pod8' is invalid" in run.stderr


def test_converter_takes_the_named_releases_defaults_and_warns_without_one(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    bare = tmp_path / "bare.json"
    bare.write_text('{"ipus_per_replica": 4, "layers_per_ipu": [0, 4, 4, 4], "gradient_accumulation_steps": 16}')
    args = [sys.executable, "-m", "ipuexp.recipes", "import", str(bare), "--base", "bert_base", "--force"]
    run = subprocess.run([*args, "--name", "old"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "enable_half_partials false (true from 0.4.3)" in run.stderr and "--optimum-graphcore 0.7.1" in run.stderr
    assert "partials_type: float" in (tmp_path / "old.yaml").read_text()
    run = subprocess.run([*args, "--name", "new", "--optimum-graphcore", "0.7.1"], capture_output=True, text=True)
    assert run.returncode == 0 and "Optimum Graphcore releases changed" not in run.stderr, run.stderr
    text = (tmp_path / "new.yaml").read_text()
    assert "partials_type: half" in text and "IPUConfig default of Optimum Graphcore 0.7.1" in text
    run = subprocess.run([*args, "--name", "bad", "--optimum-graphcore", "2.0"], capture_output=True, text=True)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "--optimum-graphcore='2.0' is invalid" in run.stderr
