"""The model and pipeline rules (``ipuexp.config.validate_pipeline``): stages and the blocks that fill them,
PopTorch's pipeline-depth rule, availableMemoryProportion per IPU and the zoo's errors, through ``validate``.
"""
from __future__ import annotations

import pytest

from ipuexp.config.errors import ConfigError
from ipuexp.config.validate import validate

BERT = "+recipe=bert_large"  # 4 IPUs per replica, heads back on IPU 0: F = 5 forward stages


def test_empty_stage_is_named_with_its_ipu(compose_config):
    cfg = compose_config([BERT, "options.pipeline.layers_per_ipu=[24,0]", "options.pipeline.device_mapping=[0,1,0]",
                          "options.available_memory_proportion=0.2", "options.replication_factor=1"])
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert str(info.value) == (
        "options.pipeline.layers_per_ipu=[24, 0] is invalid: allowed: at least one block in every pipeline stage; "
        "stage 1 (IPU 1) gets no layer and the heads go to the separate head stage (PopTorch builds a stage only "
        "from the blocks placed in it)")


@pytest.mark.parametrize("lpi,dm", [("[0,8,8,8]", "[0,1,2,3,0]"),  # embeddings alone on IPU 0 (Graphcore's BERT)
                                    ("[8,8,8,0]", "null"),          # heads alone on the last IPU
                                    ("[0,24]", "[0,1,0]")])
def test_stages_of_no_layers_that_the_embeddings_or_heads_fill_are_accepted(lpi, dm, compose_config):
    cfg = compose_config([BERT, f"options.pipeline.layers_per_ipu={lpi}", f"options.pipeline.device_mapping={dm}",
                          "options.available_memory_proportion=0.2"])
    assert validate(cfg) == []


def test_zoo_ends_match_the_built_models():
    import torch

    from ipuexp.config.compose import compose_recipe
    from ipuexp.config.store import recipe_names
    from ipuexp.models import _ENDS, build_model, zoo_ends

    seen = set()
    for recipe in recipe_names():
        model = compose_recipe(recipe).model
        with torch.device("meta"):
            flags = [b.is_layer for b in build_model(model).blocks]
        assert zoo_ends(model) == (not flags[0], not flags[-1]), recipe
        seen.add(model.name)
    assert seen == set(_ENDS)


def test_sequential_schedule_needs_no_pipeline_depth(compose_config):
    cfg = compose_config([BERT, "options.pipeline.schedule=sequential", "options.gradient_accumulation=1"])
    assert validate(cfg) == []


@pytest.mark.parametrize("framework", ["poptorch", "optimum", "popart"])
def test_interleaved_is_tensorflows_alone(framework, compose_config):
    """PopTorch and PopART pipeline (grouped) or shard (sequential); only TensorFlow has an interleaved schedule."""
    cfg = compose_config([BERT, "options.pipeline.schedule=interleaved", f"host.framework={framework}"])
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert str(info.value) == (
        f"options.pipeline.schedule='interleaved' is invalid: allowed with host.framework={framework}: grouped, "
        "sequential (pipelined and sharded execution); interleaved is TensorFlow's (host.framework=tensorflow)")
    assert validate(compose_config([BERT, "options.pipeline.schedule=interleaved", "host.framework=tensorflow"])) == []


def test_ga_rule_boundary(compose_config):
    assert validate(compose_config([BERT, "options.gradient_accumulation=9"])) == []


def test_low_amp_is_a_warning(compose_config):
    warnings = validate(compose_config([BERT, "options.available_memory_proportion=[0.04,0.2,0.2,0.2]"]))
    assert len(warnings) == 1 and "options.available_memory_proportion" in warnings[0]
    assert "0.05" in warnings[0]


def test_zoo_errors_become_config_errors(monkeypatch, compose_config):
    import ipuexp.models

    def fake(model_cfg):
        raise ValueError("model.vocab_size: 7 is not allowed; allowed: a positive integer")

    monkeypatch.setattr(ipuexp.models, "zoo_layers", fake)
    with pytest.raises(ConfigError) as info:
        validate(compose_config([BERT]))
    assert info.value.key == "model.vocab_size"
    assert str(info.value).endswith("allowed: a positive integer")


def test_layer_count_comes_from_the_zoo(monkeypatch, compose_config):
    import ipuexp.models

    monkeypatch.setattr(ipuexp.models, "zoo_layers", lambda model_cfg: 25)
    with pytest.raises(ConfigError, match="model's 25 layers"):
        validate(compose_config([BERT]))


def test_replicas_on_a_number_of_ipus_not_a_power_of_two_need_auto_round(compose_config):
    """3 replicas of a 4-IPU BERT use 12 IPUs: PopART acquires 16 only under options.auto_round_num_ipus, and
    only a system of 16 IPUs or more has them."""
    base = [BERT, "options.available_memory_proportion=0.2", "options.replication_factor=3",
            "options.gradient_accumulation=12"]
    with pytest.raises(ConfigError, match=r"options.auto_round_num_ipus=true reserves 16\); 3 x 4 = 12"):
        validate(compose_config(base + ["system=pod16"]))
    assert validate(compose_config(base + ["system=pod16", "options.auto_round_num_ipus=true"])) == []
    with pytest.raises(ConfigError, match=r"auto_round_num_ipus=True is invalid: allowed: with 3 x 4 = 12 IPUs, a "
                                          r"system of at least 16 \(system.num_ipus=12\)"):
        validate(compose_config(base + ["system.num_ipus=12", "options.auto_round_num_ipus=true"]))
