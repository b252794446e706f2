"""Datasets for the functional engine: the MNIST split, normalisation, synthetic samples, bad configuration."""
from __future__ import annotations

import gzip
import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ipuexp.data import PACKAGED_MNIST, load_dataset, resolve_path
from ipuexp.data.datasets import MNIST_MEAN, MNIST_STD, load_mnist, synthetic
from ipuexp.models.blocks import InputSpec

MNIST = PACKAGED_MNIST
needs_mnist = pytest.mark.skipif(not MNIST.is_dir(), reason="the packaged MNIST test set is missing")


def write_idx(path: Path, array: np.ndarray, code: int) -> None:
    header = bytes([0, 0, code, array.ndim]) + b"".join(struct.pack(">I", d) for d in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.tobytes())


@needs_mnist
def test_shared_mnist_splits_8000_2000_in_file_order():
    d = load_mnist(MNIST, 0.8)
    assert d.train_samples == 8000 and d.test_samples == 2000
    x, y = d.train
    assert x.shape == (8000, 1, 28, 28) and x.dtype == torch.float32
    # ToTensor + Normalize((0.1307,), (0.3081,)): a 0 pixel maps to -mean/std, a 255 pixel to (1-mean)/std
    assert float(x.min()) == pytest.approx(-MNIST_MEAN / MNIST_STD, rel=1e-6)
    assert float(x.max()) == pytest.approx((1 - MNIST_MEAN) / MNIST_STD, rel=1e-6)
    # the held-out part is the end of the file: its labels are the file's last 2000
    from ipuexp.data.idx import read_idx

    labels = read_idx(MNIST / "t10k-labels-idx1-ubyte.gz")
    assert d.test[1].tolist() == labels[8000:].tolist()
    assert "last 2000 held out" in d.description


def test_official_split_when_both_sets_exist(tmp_path):
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 12), ("t10k", 5)):
        write_idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), 8)
        write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte.gz", rng.integers(0, 10, n, dtype=np.uint8), 8)
    d = load_mnist(tmp_path, 0.5)
    assert (d.train_samples, d.test_samples) == (12, 5)


@pytest.mark.parametrize("path,split,message", [
    (None, 0.8, "data.path: None is not allowed"),
    ("/nonexistent/folder", 0.8, "is not a folder"),
])
def test_bad_paths(path, split, message):
    with pytest.raises(ValueError, match=message):
        load_mnist(path, split)


def test_folder_without_files_and_bad_split(tmp_path):
    with pytest.raises(ValueError, match="holds no MNIST IDX files"):
        load_mnist(tmp_path)
    write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", np.zeros((4, 28, 28), np.uint8), 8)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.zeros(4, np.uint8), 8)
    with pytest.raises(ValueError, match=r"data.train_split: 1.5 is not allowed; allowed: a fraction in \(0, 1\)"):
        load_mnist(tmp_path, 1.5)


def test_mismatched_counts_are_rejected(tmp_path):
    write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", np.zeros((4, 28, 28), np.uint8), 8)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.zeros(3, np.uint8), 8)
    with pytest.raises(ValueError, match="expected \\[N, 28, 28\\] images and \\[N\\] labels"):
        load_mnist(tmp_path)


def test_synthetic_follows_the_input_spec_and_the_seed():
    spec = [InputSpec("ids", (16,), "int32", high=100), InputSpec("y", (), "int32", is_label=True, high=3)]
    a, b, c = synthetic(spec, 50, 1), synthetic(spec, 50, 1), synthetic(spec, 50, 2)
    assert a.train[0].shape == (50, 16) and a.train[0].dtype == torch.int32
    assert int(a.train[0].max()) < 100 and int(a.train[1].max()) < 3
    assert torch.equal(a.train[0], b.train[0]) and not torch.equal(a.train[0], c.train[0])
    assert a.test is None


def test_load_dataset_dispatch_and_unknown_name(tmp_path):
    spec = [InputSpec("x", (3,)), InputSpec("y", (), "int32", is_label=True, high=2)]
    cfg = SimpleNamespace(dataset="synthetic", path=None, train_split=0.8)
    assert load_dataset(cfg, spec, 7, 0).train_samples == 7
    with pytest.raises(ValueError, match="data.dataset: 'imagenet' is not allowed; allowed: synthetic, mnist"):
        load_dataset(SimpleNamespace(dataset="imagenet", path=None, train_split=0.8), spec, 7, 0)


def test_relative_paths_are_anchored(tmp_path):
    assert resolve_path("data/x", tmp_path) == (tmp_path / "data/x").resolve()
    assert resolve_path(str(tmp_path), Path("/elsewhere")) == tmp_path
    assert resolve_path(None) == PACKAGED_MNIST
