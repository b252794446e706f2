"""The user's recipe folder: written recipes are found by ``+recipe=NAME``; bad names are refused."""
from __future__ import annotations

import subprocess
import sys

import pytest

from ipuexp.config.errors import ConfigError
from ipuexp.config.user_recipes import ENV_VAR, user_recipe_dir, user_recipe_names, write_recipe


@pytest.fixture
def recipe_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "mine"))
    return tmp_path / "mine"


def test_default_folder_is_recipes_of_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    assert user_recipe_dir() == (tmp_path / "recipes").resolve()


def test_written_recipe_composes_like_the_recipe_it_extends(recipe_dir):
    from ipuexp.config.compose import compose_config

    path = write_recipe("my_bert", {"defaults": ["/recipe/bert_large", {"override /system": "pod64"}],
                                    "recipe": "my_bert", "options": {"replication_factor": 16}},
                        header=["BERT-Large on an IPU-POD64"])
    assert path == recipe_dir / "my_bert.yaml"
    assert path.read_text().startswith("# @package _global_\n# BERT-Large on an IPU-POD64\n")
    assert user_recipe_names() == ["my_bert"]
    cfg = compose_config(["+recipe=my_bert"])
    base = compose_config(["+recipe=bert_large"])
    assert cfg.recipe == "my_bert" and cfg.system.name == "pod64" and cfg.options.replication_factor == 16
    assert cfg.options.pipeline.layers_per_ipu == base.options.pipeline.layers_per_ipu


@pytest.mark.parametrize("name, says", [("bert_large", "packaged recipe"), ("../x", "not allowed"),
                                        ("9lives", "not allowed")])
def test_bad_names_are_refused(recipe_dir, name, says):
    with pytest.raises(ConfigError, match=says):
        write_recipe(name, {"recipe": name})


def test_existing_recipe_is_kept_unless_overwritten(recipe_dir):
    write_recipe("mine", {"recipe": "mine", "data": {"micro_batch_size": 2}})
    with pytest.raises(ConfigError, match="exists"):
        write_recipe("mine", {"recipe": "mine"})
    write_recipe("mine", {"recipe": "mine", "data": {"micro_batch_size": 4}}, overwrite=True)
    assert "micro_batch_size: 4" in (recipe_dir / "mine.yaml").read_text()


def test_a_failed_write_leaves_neither_a_half_recipe_nor_a_temporary_file(recipe_dir, monkeypatch):
    import errno
    import os

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        write_recipe("mine", {"recipe": "mine", "data": {"micro_batch_size": 2}})
    assert list(recipe_dir.iterdir()) == []


def test_cli_runs_a_recipe_from_the_launch_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "tiny.yaml").write_text(
        "# @package _global_\ndefaults:\n  - /recipe/mnist_pipeline\nrecipe: tiny\n")
    out = subprocess.run([sys.executable, "-m", "ipuexp", "+recipe=tiny", "tracking.enabled=false",
                          "engine.mode=analytic", "report.charts=never"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "tiny" in (tmp_path / "outputs").rglob("result.json").__next__().read_text()
