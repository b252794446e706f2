"""Malformed configurations: each is rejected with one line naming the offending key, its value and what is allowed.

Every case composes through Hydra exactly as the CLI does (schema errors from OmegaConf, then ``validate``).
"""
from __future__ import annotations

import dataclasses

import pytest

from ipuexp.config.errors import ConfigError
from ipuexp.config.schema import ExperimentConfig
from ipuexp.config.validate import resolve_path, validate

BERT = "+recipe=bert_large"  # 4 IPUs per replica, heads back on IPU 0: F = 5 forward stages
# (case id, overrides, offending key). Caught by the schema during composition:
SCHEMA_ERRORS = [
    ("unknown_key", [BERT, "options.foo=1"], "options.foo"),
    ("unknown_ipu_key", ["ipu.cores=3"], "ipu.cores"),
    ("wrong_type_int", [BERT, "options.replication_factor=abc"], "options.replication_factor"),
    ("wrong_type_ipu", ["ipu.tiles=many"], "ipu.tiles"),
    ("partials_enum", [BERT, "options.partials_type=double"], "options.partials_type"),
    ("schedule_enum", [BERT, "options.pipeline.schedule=zigzag"], "options.pipeline.schedule"),
    ("engine_mode_enum", ["engine.mode=turbo"], "engine.mode"),
]
# Caught by validate(): ranges and cross-field rules.
RULE_ERRORS = [
    ("added_unknown_key", [BERT, "+options.bar=1"], "options.bar"),
    ("added_unknown_nested_key", [BERT, "+options.io.turbo=true"], "options.io.turbo"),
    ("precision", [BERT, "options.precision=16.8"], "options.precision"),
    ("replicas_zero", [BERT, "options.replication_factor=0"], "options.replication_factor"),
    ("replicas_exceed_system", [BERT, "options.replication_factor=8"], "options.replication_factor"),
    ("ipus_not_power_of_two", [BERT, "system=pod64", "options.replication_factor=3"], "options.replication_factor"),
    ("layers_sum", [BERT, "options.pipeline.layers_per_ipu=[3,7,7,6]"], "options.pipeline.layers_per_ipu"),
    ("layers_negative", [BERT, "options.pipeline.layers_per_ipu=[3,7,-1,15]"], "options.pipeline.layers_per_ipu"),
    ("stage_without_blocks_before_head_stage", [BERT, "options.pipeline.layers_per_ipu=[24,0]",
                                                "options.pipeline.device_mapping=[0,1,0]",
                                                "options.available_memory_proportion=0.2"],
     "options.pipeline.layers_per_ipu"),
    ("stage_without_blocks_in_the_middle", [BERT, "options.pipeline.layers_per_ipu=[8,0,8,8]"],
     "options.pipeline.layers_per_ipu"),
    ("first_stage_without_blocks_no_stem", ["+recipe=mnist_pipeline", "options.pipeline.layers_per_ipu=[0,2,1,1]"],
     "options.pipeline.layers_per_ipu"),
    ("head_stage_without_heads", ["+recipe=mnist_pipeline", "options.pipeline.device_mapping=[0,1,2,3,0]"],
     "options.pipeline.device_mapping"),
    ("mapping_length", [BERT, "options.pipeline.device_mapping=[0,1,2]"], "options.pipeline.device_mapping"),
    ("mapping_gap", [BERT, "options.pipeline.device_mapping=[0,1,3,4,0]"], "options.pipeline.device_mapping"),
    ("mapping_one_ipu_model", ["options.pipeline.device_mapping=[0,1]"], "options.pipeline.device_mapping"),
    ("ga_below_pipeline_depth", [BERT, "options.gradient_accumulation=8"], "options.gradient_accumulation"),
    ("inference_device_iterations", [BERT, "training=false", "options.device_iterations=4"],
     "options.device_iterations"),
    ("io_tiles_odd", [BERT, "options.io.num_io_tiles=7"], "options.io.num_io_tiles"),
    ("io_tiles_too_few", [BERT, "options.io.num_io_tiles=30"], "options.io.num_io_tiles"),
    ("io_tiles_too_many", [BERT, "options.io.num_io_tiles=194"], "options.io.num_io_tiles"),
    ("amp_above_one", [BERT, "options.available_memory_proportion=1.5"], "options.available_memory_proportion"),
    ("amp_zero", [BERT, "options.available_memory_proportion=0"], "options.available_memory_proportion"),
    ("amp_list_length", [BERT, "options.available_memory_proportion=[0.2,0.2]"],
     "options.available_memory_proportion"),
    ("amp_string", [BERT, "options.available_memory_proportion=lots"], "options.available_memory_proportion"),
    ("micro_batch_zero", [BERT, "data.micro_batch_size=0"], "data.micro_batch_size"),
    ("device_iterations_zero", [BERT, "options.device_iterations=0"], "options.device_iterations"),
    ("ga_zero", ["options.gradient_accumulation=0"], "options.gradient_accumulation"),
    ("prefetch_zero", [BERT, "options.io.prefetch_depth=0"], "options.io.prefetch_depth"),
    ("instances_not_divisor", [BERT, "options.num_instances=3"], "options.num_instances"),
    ("embedding_serialization_zero", [BERT, "options.embedding_serialization_factor=0"],
     "options.embedding_serialization_factor"),
    ("mk1_on_pod", ["ipu=mk1", "system=pod16"], "ipu.name"),
    ("mk2_on_ipu_server", ["ipu=mk2", "system=server16"], "ipu.name"),
    ("loss_scaling_zero", [BERT, "options.loss_scaling=0"], "options.loss_scaling"),
    ("loss_scaling_negative", [BERT, "options.loss_scaling=-128"], "options.loss_scaling"),
    ("state_precision", [BERT, "optimizer.state_precision=bfloat16"], "optimizer.state_precision"),
    ("io_precision", ["data.io_precision=int4"], "data.io_precision"),
    ("dataset", ["data.dataset=imagenet"], "data.dataset"),
    ("functional_mnist_missing", ["+recipe=mnist_pipeline", "data.path=/nonexistent/mnist"], "data.path"),
    ("functional_mnist_not_a_folder", ["+recipe=mnist_pipeline", "data.path=README.md"], "data.path"),
    ("model_size", [BERT, "model.size=xl"], "model.size"),
    ("model_name", ["model.name=alexnet"], "model.name"),
    ("machine_multiple", ["system.num_ipus=10"], "system.num_ipus"),
    ("momentum_range", ["optimizer.momentum=1.5"], "optimizer.momentum"),
    ("negative_learning_rate", ["optimizer.learning_rate=-0.1"], "optimizer.learning_rate"),
    ("train_split", ["data.train_split=1.5"], "data.train_split"),
    ("racks_without_gw_links", ["system=pod128", "system.gw_link_bytes_per_s=0"], "system.gw_link_bytes_per_s"),
    ("tracking_uri_scheme", ["tracking.uri=bogus://x"], "tracking.uri"),
    ("tracking_ui_url", ["tracking.ui_url=localhost:5001"], "tracking.ui_url"),
    ("ray_cpus", ["runner.ray.num_cpus=0"], "runner.ray.num_cpus"),
]


@pytest.mark.parametrize("overrides,key", [pytest.param(o, k, id=i) for i, o, k in SCHEMA_ERRORS])
def test_schema_rejects_at_composition(overrides, key, compose_config):
    with pytest.raises(ConfigError) as info:
        compose_config(overrides)
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}=") and "\n" not in str(info.value)


@pytest.mark.parametrize("overrides,key", [pytest.param(o, k, id=i) for i, o, k in RULE_ERRORS])
def test_validate_names_key_value_and_rule(overrides, key, compose_config):
    cfg = compose_config(overrides)
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    message = str(info.value)
    assert info.value.key == key
    assert message.startswith(f"{key}=") and " is invalid: " in message
    assert "allowed" in message
    assert "\n" not in message


def test_enough_malformed_cases():
    assert len(SCHEMA_ERRORS) + len(RULE_ERRORS) >= 25


def test_default_config_is_valid(compose_config):
    assert validate(compose_config([])) == []


def test_error_message_carries_value_and_rule(compose_config):
    with pytest.raises(ConfigError) as info:
        validate(compose_config([BERT, "options.gradient_accumulation=8"]))
    assert str(info.value) == ("options.gradient_accumulation=8 is invalid: allowed: >= 2*F - 1 = 9 for a pipelined "
                               "training run with F=5 forward stages (PopTorch's rule)")


def test_a_learning_rate_of_zero_is_accepted(compose_config):
    assert validate(compose_config(["optimizer.learning_rate=0"])) == []


def test_io_tiles_boundaries_accepted(compose_config):
    for tiles in (0, 32, 192):
        assert validate(compose_config([BERT, f"options.io.num_io_tiles={tiles}"])) == []


def test_rts_with_one_replica_is_a_warning(compose_config):
    warnings = validate(compose_config([BERT, "options.replication_factor=1"]))
    assert warnings == [w for w in warnings if "replicated_tensor_sharding" in w] and len(warnings) == 1
    assert "options.tensor_locations.optimizer_state.replicated_tensor_sharding" in warnings[0]


def test_mk1_runs_on_an_ipu_server(compose_config):
    assert validate(compose_config(["ipu=mk1", "system=server16"])) == []


def test_bow_on_every_pod(compose_config):
    for system in ("pod4", "pod16", "pod64", "pod128", "pod256"):
        assert validate(compose_config(["ipu=bow", f"system={system}"])) == []


def test_validate_accepts_the_dataclass_object():
    exp = ExperimentConfig()
    assert validate(exp) == []
    bad = dataclasses.replace(exp, options=dataclasses.replace(exp.options, precision="8.8"))
    with pytest.raises(ConfigError) as info:
        validate(bad)
    assert info.value.key == "options.precision"


def test_relative_data_paths_are_taken_from_the_launch_directory(tmp_path, monkeypatch):
    from ipuexp.data import PACKAGED_MNIST

    monkeypatch.chdir(tmp_path)
    assert resolve_path("data/mnist") == tmp_path / "data" / "mnist"
    assert resolve_path(str(tmp_path)) == tmp_path
    assert resolve_path(None) == PACKAGED_MNIST
    assert sorted(p.name for p in PACKAGED_MNIST.iterdir()) == ["t10k-images-idx3-ubyte.gz",
                                                                 "t10k-labels-idx1-ubyte.gz"]


def test_mnist_folder_given_by_the_user(tmp_path, monkeypatch, compose_config):
    folder = f"data.path={tmp_path}"
    with pytest.raises(ConfigError, match="images-idx3-ubyte"):
        validate(compose_config(["+recipe=mnist_pipeline", folder]))
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        (tmp_path / name).write_bytes(b"")
    assert validate(compose_config(["+recipe=mnist_pipeline", folder])) == []
    assert validate(compose_config(["+recipe=mnist_pipeline"])) == []  # the packaged test set


def test_a_mistyped_key_names_the_key_it_resembles():
    from ipuexp.config.errors import unknown_key

    names = ["replication_factor", "gradient_accumulation", "device_iterations"]
    assert unknown_key("options.gradient_acumulation", names) == \
        "unknown key; did you mean options.gradient_accumulation?"
    assert unknown_key("options.xyz", names) == \
        "unknown key; allowed keys here: replication_factor, gradient_accumulation, device_iterations"
