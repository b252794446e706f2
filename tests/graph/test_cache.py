"""JSON cache of captures: round trip, keying, default folder, damaged entries."""
from __future__ import annotations

import json

import pytest

from ipuexp.config.schema import ModelConfig
from ipuexp.graph import cache
from ipuexp.graph.capture import capture

MNIST = ModelConfig(name="mnist_cnn", size="tutorial", image_size=28)


def test_round_trip_returns_an_equal_graph(tmp_path):
    first = capture(MNIST, 4, cache_dir=str(tmp_path))
    files = list((tmp_path / "graphs").glob("*.json"))
    assert len(files) == 1 and files[0].name.startswith("mnist_cnn-tutorial-mbs4-")
    assert json.loads(files[0].read_text())["micro_batch_size"] == 4  # plain JSON, no pickle
    again = capture(MNIST, 4, cache_dir=str(tmp_path))
    assert again == first and again is not first
    assert cache.graph_from_dict(json.loads(json.dumps(cache.graph_to_dict(first)))) == first


def test_cached_entry_is_what_capture_returns(tmp_path):
    first = capture(MNIST, 2, cache_dir=str(tmp_path))
    path = cache.entry_path(MNIST, 2, str(tmp_path))
    data = json.loads(path.read_text())
    data["capture_seconds"] = 123.0
    path.write_text(json.dumps(data))
    assert capture(MNIST, 2, cache_dir=str(tmp_path)).capture_seconds == 123.0
    assert capture(MNIST, 2, cache_dir=str(tmp_path), use_cache=False).blocks == first.blocks


def test_key_depends_on_model_fields_and_micro_batch():
    base = cache.cache_key(MNIST, 4)
    assert base == cache.cache_key(ModelConfig(name="mnist_cnn", size="tutorial", image_size=28), 4)
    assert base != cache.cache_key(MNIST, 8)
    assert base != cache.cache_key(ModelConfig(name="mnist_cnn", size="tutorial", image_size=28, num_classes=5), 4)
    assert cache.cache_key(ModelConfig(name="bert", sequence_length=128), 1) != \
        cache.cache_key(ModelConfig(name="bert", sequence_length=384), 1)


def test_default_folder_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("IPUEXP_CACHE_DIR", str(tmp_path / "env"))
    assert cache.default_cache_dir() == tmp_path / "env"
    capture(MNIST, 1)
    assert list((tmp_path / "env" / "graphs").glob("mnist_cnn-*.json"))
    monkeypatch.delenv("IPUEXP_CACHE_DIR")
    assert str(cache.default_cache_dir()).endswith(".cache/ipuexp")


def test_damaged_entry_is_recaptured(tmp_path):
    path = cache.entry_path(MNIST, 3, str(tmp_path))
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    g = capture(MNIST, 3, cache_dir=str(tmp_path))
    assert g.micro_batch_size == 3 and cache.load(path) == g


def test_entries_without_saved_boundary_fields_still_load(tmp_path, monkeypatch):
    """Entries written before ``saved_input_elements``/``saved_output_elements`` existed load with zeros, and the
    capture format in the key makes new captures use new entries."""
    from ipuexp.graph import types as capture_module

    g = capture(MNIST, 2, cache_dir=str(tmp_path))
    data = cache.graph_to_dict(g)
    for b in data["blocks"]:
        del b["saved_input_elements"], b["saved_output_elements"]
    old = cache.graph_from_dict(json.loads(json.dumps(data)))
    assert all(b.saved_input_elements == b.saved_output_elements == 0 for b in old.blocks)
    assert [b.saved_elements for b in old.blocks] == [b.saved_elements for b in g.blocks]
    assert g.meta["capture_format"] == str(capture_module.CAPTURE_FORMAT) == "3"
    key = cache.cache_key(MNIST, 2)
    monkeypatch.setattr(capture_module, "CAPTURE_FORMAT", 1)
    assert cache.cache_key(MNIST, 2) != key


def test_a_failed_write_leaves_no_temporary_file_and_is_a_warning(tmp_path, monkeypatch, caplog):
    import errno
    import os

    graph = capture(MNIST, 4, cache_dir=None)

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    cache.save(graph, tmp_path / "g" / "entry.json")  # the cache only saves time: the run goes on
    assert list((tmp_path / "g").iterdir()) == []
    assert "cannot be used (No space left on device" in caplog.text


@pytest.mark.parametrize("kind", ["a file", "read-only"])
def test_a_cache_folder_that_cannot_be_written_is_a_warning(tmp_path, caplog, kind):
    import os

    folder = tmp_path / "cache"
    if kind == "a file":
        folder.write_text("")
    else:
        folder.mkdir()
        folder.chmod(0o500)
        if os.access(folder, os.W_OK):  # root writes anyway
            pytest.skip("this user writes into read-only folders")
    try:
        graph = capture(MNIST, 4, cache_dir=str(folder))
    finally:
        if folder.is_dir():
            folder.chmod(0o700)
    assert graph.micro_batch_size == 4
    assert f"the cache folder {folder} cannot be used" in caplog.text


def test_a_run_whose_cache_folder_is_a_file_warns_and_goes_on(tmp_path):
    from tests.test_cli import run_cli

    (tmp_path / "a_file").write_text("")
    proc = run_cli("+recipe=mnist_pipeline", "engine.mode=analytic", f"engine.cache_dir={tmp_path / 'a_file'}",
                   "tracking.enabled=false", "report.charts=never", "hydra.run.dir=run", cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"the cache folder {tmp_path / 'a_file'} cannot be used (Not a directory" in proc.stdout
    assert (tmp_path / "run" / "result.json").is_file() and (tmp_path / "a_file").read_text() == ""


def test_an_entry_that_is_not_of_its_model_is_captured_again(tmp_path):
    first = capture(MNIST, 2, cache_dir=str(tmp_path))
    path = cache.entry_path(MNIST, 2, str(tmp_path))
    data = json.loads(path.read_text())
    data["micro_batch_size"], data["num_layers"] = 8, 3  # well-formed, but another capture's figures
    data["blocks"] = data["blocks"][:-1]
    path.write_text(json.dumps(data))
    again = capture(MNIST, 2, cache_dir=str(tmp_path))
    assert again.blocks == first.blocks and again.micro_batch_size == 2
    assert json.loads(path.read_text())["num_layers"] == first.num_layers  # repaired
