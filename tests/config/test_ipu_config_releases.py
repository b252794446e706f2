"""IPUConfig's defaults by Optimum Graphcore release: the fields an ipu_config.json leaves out, the release named
on the command line or to the converter, and the warning when none is named."""
from __future__ import annotations

import json

import pytest

from ipuexp.config import ipu_config as optimum
from ipuexp.config import ipu_config_releases as releases
from ipuexp.config.errors import ConfigError

# Only the layout: every field whose default changed is left out.
BARE = {"ipus_per_replica": 4, "layers_per_ipu": [3, 7, 7, 7], "gradient_accumulation_steps": 32}


@pytest.mark.parametrize("release, half, proportion, on_chip, recompute", [
    (None, "float", 0.6, False, False),
    ("0.3.2", "float", 0.6, False, False),
    ("0.4.2", "float", 0.6, False, False),
    ("0.4.3", "half", 0.6, False, False),
    ("0.5", "half", 0.6, False, False),
    ("0.6.0", "half", 0.2, False, True),
    ("0.6.1", "half", 0.2, True, False),
    ("v0.7.1", "half", 0.2, True, False),
])
def test_left_out_fields_take_the_named_releases_defaults(release, half, proportion, on_chip, recompute):
    values, notes, _ = optimum.options(BARE, "pod16", 24, None, release=release)
    assert values["options.partials_type"] == half
    assert values["options.available_memory_proportion"] == proportion
    assert values["options.tensor_locations.optimizer_state.on_chip"] is on_chip
    assert values["options.recomputation.checkpoint_every_layer"] is recompute
    assert ("of Optimum Graphcore" in notes["options.partials_type"]) == (release is not None)


def test_a_field_the_file_gives_is_never_a_default():
    given = {**BARE, "enable_half_partials": False, "matmul_proportion": 0.3}
    values, _, _ = optimum.options(given, "pod16", 24, None, release="0.7.1")
    assert values["options.partials_type"] == "float" and values["options.available_memory_proportion"] == 0.3


@pytest.mark.parametrize("release", ["0.8", "0.0.9", "1", "banana", "0.7.1.2"])
def test_a_release_outside_optimum_graphcores_is_refused_in_one_line(release):
    with pytest.raises(ConfigError) as err:
        releases.parse(release)
    assert str(err.value) == (f"model.hf.optimum_graphcore={release!r} is invalid: allowed: an Optimum Graphcore "
                              "release from 0.1.0 to 0.7.1 (e.g. 0.7.1), or null")


def test_the_warning_names_each_left_out_field_a_later_release_changed():
    line = releases.defaults_line("ipu_config.json", BARE, None)
    assert line is not None and "\n" not in line
    for said in ("enable_half_partials false (true from 0.4.3)", "matmul_proportion 0.6 (0.2 from 0.6.0)",
                 "optimizer_state_offchip true (false from 0.6.1)",
                 "recompute_checkpoint_every_layer false (true from 0.6.0, false from 0.6.1)",
                 "model.hf.optimum_graphcore=0.7.1"):
        assert said in line
    given = {**BARE, "enable_half_partials": True, "matmul_proportion": 0.25, "optimizer_state_offchip": True,
             "recompute_checkpoint_every_layer": True}
    assert releases.defaults_line("ipu_config.json", given, None) is None
    assert releases.defaults_line("ipu_config.json", BARE, "0.7.1") is None


def test_the_run_takes_the_release_and_the_checks_refuse_a_bad_one(tmp_path):
    from ipuexp.commands.run import preflight

    path = tmp_path / "ipu_config.json"
    path.write_text(json.dumps(BARE))
    cfg = preflight(["+recipe=bert_large", f"model.hf.ipu_config={path}", "model.hf.optimum_graphcore=0.7.1"])
    assert cfg.options.partials_type == "half" and cfg.options.available_memory_proportion == 0.2
    cfg = preflight(["+recipe=bert_large", f"model.hf.ipu_config={path}"])
    assert cfg.options.partials_type == "float" and cfg.options.available_memory_proportion == 0.6
    with pytest.raises(ConfigError, match="model.hf.optimum_graphcore='0.9' is invalid"):
        preflight(["+recipe=bert_large", "model.hf.optimum_graphcore=0.9"])


def test_a_release_without_a_file_is_a_warning(compose_config):
    from ipuexp.config.validate import validate

    warnings = validate(compose_config(["+recipe=bert_large", "model.hf.optimum_graphcore=0.7.1"]))
    assert any(w.startswith("model.hf.optimum_graphcore='0.7.1' has no effect without model.hf.ipu_config")
               for w in warnings)
