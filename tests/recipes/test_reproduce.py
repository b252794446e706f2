"""Importing the configuration each packaged recipe mirrors gives that recipe back: the same configuration and the
same predictions (throughput, memory per IPU). The same holds for the calibration runs that mirror a TensorFlow BERT
JSON file."""
from __future__ import annotations

import dataclasses

import pytest

from ipuexp.config.compose import compose_recipe
from ipuexp.importers import read
from ipuexp.importers.recipe import write
from ipuexp.config.store import recipe_names
from ipuexp.config.user_recipes import ENV_VAR
from published import DATA, bundled, shared_copy

MIRRORED = [n for n in recipe_names() if "graphcore-configs" in str(shared_copy(compose_recipe(n).source)[0])]


def _plain(exp):
    d = dataclasses.asdict(exp)
    d.pop("recipe"), d.pop("source")
    return d


@pytest.fixture
def recipe_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    return tmp_path


def test_every_mirrored_recipe_is_covered():
    assert {"bert_base", "bert_large", "bert_large_pod64", "bert_large_sl384", "bert_large_sl384_pod64",
            "gpt2_medium", "gpt2_medium_pod64", "resnet50", "resnet50_pod64", "vit_b16", "vit_b16_pod64"} <= \
        set(MIRRORED)


@pytest.mark.parametrize("name", MIRRORED)
def test_import_reproduces_the_recipe(name, recipe_dir):
    packaged = compose_recipe(name)
    copy, config = shared_copy(packaged.source)
    locator = packaged.source.partition("#")[0]
    draft = read(copy, config, source=locator)
    path, imported = write(draft, f"imported_{name}")
    assert imported.source == packaged.source
    assert "shared" not in path.read_text()
    assert _plain(imported) == _plain(packaged)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert_large", "gpt2_medium", "resnet50", "vit_b16_pod64"])
def test_imported_recipe_predicts_what_the_packaged_one_does(name, recipe_dir, tmp_path):
    from ipuexp.runner.evaluation import evaluate

    packaged = compose_recipe(name)
    copy, config = shared_copy(packaged.source)
    write(read(copy, config, source=packaged.source.partition("#")[0]), f"imported_{name}")
    imported = compose_recipe(f"imported_{name}")
    cache = str(tmp_path / "captures")
    a, b = evaluate(packaged, cache_dir=cache).result, evaluate(imported, cache_dir=cache).result
    assert b.throughput.samples_per_s == a.throughput.samples_per_s
    assert [m.total_bytes for m in b.memory.ipus] == [m.total_bytes for m in a.memory.ipus]
    assert [m.max_tile_bytes for m in b.memory.ipus] == [m.max_tile_bytes for m in a.memory.ipus]


# Calibration runs that mirror a published JSON file, imported on the run's IPU and system.
CALIBRATION = ["bert_large_ph1_bow_pod16_tf2", "bert_large_ph2_sl384_bow_pod16_tf1"]


def _import_run(row_id, tmp_path):
    from ipuexp.config.compose import compose_run

    run = compose_run(row_id)
    copy, config = shared_copy(run.source)
    if copy.name.endswith("_selected.json"):  # the copy bundles several files of the repository
        copy, config = bundled(copy, config, tmp_path), None
    draft = read(copy, config, source=run.source)
    draft.ipu, draft.system = run.ipu.name, run.system.name
    return run, write(draft, f"imported_{row_id}")[1]


@pytest.mark.parametrize("row_id", CALIBRATION)
def test_import_reproduces_the_calibration_run(row_id, recipe_dir, tmp_path):
    run, imported = _import_run(row_id, tmp_path)
    assert imported.source == run.source
    assert _plain(imported) == _plain(run)


@pytest.mark.slow
@pytest.mark.parametrize("row_id", CALIBRATION)
def test_imported_calibration_run_predicts_what_the_run_does(row_id, recipe_dir, tmp_path):
    from ipuexp.runner.evaluation import evaluate

    run, imported = _import_run(row_id, tmp_path)
    cache = str(tmp_path / "captures")
    a, b = evaluate(run, cache_dir=cache).result, evaluate(imported, cache_dir=cache).result
    assert b.throughput.samples_per_s == a.throughput.samples_per_s
    assert [m.total_bytes for m in b.memory.ipus] == [m.total_bytes for m in a.memory.ipus]
    assert [m.max_tile_bytes for m in b.memory.ipus] == [m.max_tile_bytes for m in a.memory.ipus]
