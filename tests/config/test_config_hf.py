"""model=hf in the configuration: the group, its typed fields and their one-line errors (needs the hf extra)."""
from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from ipuexp.commands.run import preflight  # noqa: E402
from ipuexp.config.compose import load_experiment  # noqa: E402
from ipuexp.config.errors import ConfigError  # noqa: E402


def test_model_hf_selects_a_shipped_transformers_model():
    exp = load_experiment("model=hf", "model.hf.config=gpt2-medium", "model.hf.task=causal-lm", "system=pod4",
                          "options.pipeline.layers_per_ipu=[6,6,6,6]", "options.gradient_accumulation=16")
    assert exp.model.name == "hf" and exp.model.hf.config == "gpt2-medium" and exp.model.hf.ipu_config is None


@pytest.mark.parametrize("overrides, message", [
    (["model=hf", "model.hf.task=foo"],
     "model.hf.task='foo' is invalid: allowed: pretraining | masked-lm | causal-lm | classification | "
     "question-answering"),
    (["model=hf", "model.hf.config=nobody/nothing"], "model.hf.config='nobody/nothing' is invalid: allowed: a "),
    (["model=hf", "model.sequence_length=600"], "model.sequence_length=600 is invalid: allowed: an integer in "
                                                "[1, 512] for bert-large-uncased"),
    (["model=hf", "options.pipeline.layers_per_ipu=[3,7,7,6]"], "the model's 24 layers (sum is 23)"),
    (["+recipe=bert_large", "model=hf"], "model.name='bert' is invalid: allowed: hf with model=hf"),
])
def test_bad_hf_values_are_one_line(overrides, message):
    with pytest.raises(ConfigError) as err:
        preflight(overrides)
    assert message in str(err.value) and "\n" not in str(err.value)


HF_BERT = ["model=hf", "model.hf.config=bert-base-uncased", "options.pipeline.layers_per_ipu=[3,3,3,3]",
           "options.gradient_accumulation=64"]


def _count_builds(monkeypatch, cache_dir) -> list:
    """Each model build appended to the returned list; no layer blocks known in this process, captures in
    ``cache_dir``."""
    import ipuexp.models as models

    monkeypatch.setenv("IPUEXP_CACHE_DIR", str(cache_dir))
    built: list = []
    real = models.build_model
    monkeypatch.setattr(models, "build_model", lambda cfg: built.append(1) or real(cfg))
    monkeypatch.setattr(models, "_FLAGS", {})
    return built


def test_the_rule_table_builds_a_transformers_model_once_per_configuration(compose_config, monkeypatch, tmp_path):
    # A plan checks thousands of configurations of one model: its blocks are found once, not on every check.
    from ipuexp.config.validate import validate

    built = _count_builds(monkeypatch, tmp_path)
    cfg = compose_config(HF_BERT)
    validate(cfg)
    validate(cfg)
    assert len(built) == 1
    other = compose_config(["model=hf", "model.hf.config=bert-base-uncased", "model.num_layers=8",
                            "options.pipeline.layers_per_ipu=[2,2,2,2]", "options.gradient_accumulation=64"])
    validate(other)
    assert len(built) == 2  # another configuration is another model


def test_a_later_process_reads_the_layer_blocks_from_disk(compose_config, monkeypatch, tmp_path):
    # A warm capture cache needs no torch: the layer blocks of a Transformers model are kept beside the captures,
    # under a key of its configuration and the model code, and read back without building the model.
    import ipuexp.models as models
    from ipuexp.config.validate import validate

    built = _count_builds(monkeypatch, tmp_path)
    cfg = compose_config(HF_BERT)
    validate(cfg)
    stored = list((tmp_path / "layer-flags").glob("*.json"))
    assert len(built) == 1 and len(stored) == 1
    monkeypatch.setattr(models, "_FLAGS", {})  # a new process
    validate(cfg)
    assert len(built) == 1
    stored[0].write_text("not json")  # a damaged entry is built again and rewritten
    monkeypatch.setattr(models, "_FLAGS", {})
    validate(cfg)
    assert len(built) == 2 and stored[0].read_text().startswith("[")


def test_a_stored_entry_at_odds_with_the_model_is_rebuilt_not_trusted(compose_config, monkeypatch, tmp_path):
    """A well-formed entry of the wrong length would make the user's valid layers_per_ipu wrong: the model is built
    again before the rule refuses it, and the entry repaired."""
    import json

    from ipuexp import models
    from ipuexp.config.validate import validate

    built = _count_builds(monkeypatch, tmp_path)
    cfg = compose_config(HF_BERT)
    validate(cfg)
    stored = list((tmp_path / "layer-flags").glob("*.json"))
    right = json.loads(stored[0].read_text())
    stored[0].write_text(json.dumps([False] + [True] * 5 + [False]))  # 5 layers, not 12
    monkeypatch.setattr(models, "_FLAGS", {})  # a new process
    validate(cfg)
    assert len(built) == 2 and json.loads(stored[0].read_text()) == right


def test_a_cache_folder_that_cannot_be_used_is_a_warning(compose_config, monkeypatch, tmp_path, caplog):
    from ipuexp import models
    from ipuexp.config.validate import validate

    (tmp_path / "a_file").write_text("")
    built = _count_builds(monkeypatch, tmp_path / "a_file")
    validate(compose_config(HF_BERT))
    assert len(built) == 1 and (tmp_path / "a_file").read_text() == ""
    assert "the cache folder" in caplog.text and "cannot be used" in caplog.text
