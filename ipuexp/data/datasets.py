"""Datasets for the functional engine as in-memory tensors: real MNIST from IDX files, or synthetic samples.

A dataset is a tuple of tensors with the samples along the first dimension, in the order of the model's
``example_inputs`` (inputs followed by labels), so one gather by index builds a host call's batch.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

MNIST_MEAN = 0.1307
MNIST_STD = 0.3081
"""Normalisation of the PopTorch pipelining tutorial ("Preparing the data":
``Normalize((0.1307,), (0.3081,))`` after ``ToTensor()`` scales pixels to [0, 1])."""

_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


@dataclass
class DatasetSplits:
    """Training and held-out samples."""

    name: str
    """Dataset name (mnist, synthetic)."""
    train: Tuple[Any, ...]
    """Training tensors (inputs then labels), samples along dimension 0."""
    test: Optional[Tuple[Any, ...]]
    """Held-out tensors, or None when the dataset has no test split."""
    description: str = ""
    """Where the samples came from (files, split)."""

    @property
    def train_samples(self) -> int:
        return int(self.train[0].shape[0])

    @property
    def test_samples(self) -> int:
        return int(self.test[0].shape[0]) if self.test is not None else 0


def _find(folder: Path, stem: str) -> Optional[Path]:
    for name in (stem, stem + ".gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def _mnist_pair(folder: Path, which: str) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    from ipuexp.data.idx import read_idx

    images, labels = (_find(folder, s) for s in _MNIST_FILES[which])
    if images is None or labels is None:
        return None
    x, y = read_idx(images), read_idx(labels)
    if x.ndim != 3 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise ValueError(f"data.path: {folder} holds MNIST files of shapes {x.shape} and {y.shape}; "
                         "expected [N, 28, 28] images and [N] labels")
    return x, y


def _to_tensors(x: np.ndarray, y: np.ndarray) -> Tuple[Any, Any]:
    import torch

    images = torch.from_numpy(x.astype(np.float32) / 255.0).sub_(MNIST_MEAN).div_(MNIST_STD).unsqueeze(1)
    return images.contiguous(), torch.from_numpy(y.astype(np.int64))


def load_mnist(path: Any, train_split: float = 0.8) -> DatasetSplits:
    """MNIST from the IDX files in ``path``.

    With both the training and test files, the official split is used. With one set only (the shared data
    holds the 10,000 test images), its first ``train_split`` share trains and the rest is held out, in file
    order, so the held-out images are the same for every seed.
    """
    if path is None:
        raise ValueError("data.path: None is not allowed; allowed: a folder holding MNIST IDX files "
                         "(t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz])")
    folder = Path(path)
    if not folder.is_dir():
        raise ValueError(f"data.path: {str(path)!r} is not a folder; allowed: a folder holding MNIST IDX files")
    train, test = _mnist_pair(folder, "train"), _mnist_pair(folder, "test")
    if train is not None and test is not None:
        return DatasetSplits("mnist", _to_tensors(*train), _to_tensors(*test),
                             f"{folder}: official split, {len(train[1])} / {len(test[1])}")
    only = train if train is not None else test
    if only is None:
        raise ValueError(f"data.path: {str(path)!r} holds no MNIST IDX files; allowed: a folder with "
                         "train-* and/or t10k-* images and labels (optionally .gz)")
    if not 0.0 < float(train_split) < 1.0:
        raise ValueError(f"data.train_split: {train_split} is not allowed; allowed: a fraction in (0, 1)")
    x, y = only
    n_train = int(round(len(y) * float(train_split)))
    return DatasetSplits(
        "mnist",
        _to_tensors(x[:n_train], y[:n_train]),
        _to_tensors(x[n_train:], y[n_train:]),
        f"{folder}: first {n_train} of {len(y)} images train, last {len(y) - n_train} held out",
    )


PACKED_INPUTS = ("input_ids", "token_type_ids", "position_ids", "sequence_ids", "mlm_positions", "cls_positions",
                 "mlm_labels", "nsp_labels")
"""The inputs of packed BERT (``ipuexp.models.bert``), whose synthetic samples are real packs."""


def synthetic(input_spec: Sequence[Any], samples: int, seed: int) -> DatasetSplits:
    """Random samples shaped as the model's inputs (normal floats, uniform integer ids and labels); for packed BERT,
    packs of random sequences laid out as the model reads them."""
    import torch

    from ipuexp.models.blocks import make_input

    g = torch.Generator().manual_seed(int(seed))
    if tuple(spec.name for spec in input_spec) == PACKED_INPUTS:
        tensors = packs(input_spec, samples, g)
        return DatasetSplits("synthetic", tuple(tensors), None, f"{samples} packs of random sequences (seed {seed})")
    tensors: List[Any] = [make_input(spec, samples, "cpu", generator=g) for spec in input_spec]
    return DatasetSplits("synthetic", tuple(tensors), None, f"{samples} random samples (seed {seed})")


def packs(input_spec: Sequence[Any], samples: int, g: Any) -> List[Any]:
    """``samples`` packs, each of 1 to k random sequences filling part of the row: per token its sequence's index
    (1, 2, ...; 0 padding) and its position within it; the masked-LM slots spread over the sequences' tokens, each
    sequence's first token for the NSP head, -100 for slots a pack leaves empty."""
    import torch

    spec = {s.name: s for s in input_spec}
    seq, masked, per_pack = spec["input_ids"].shape[0], spec["mlm_positions"].shape[0], spec["cls_positions"].shape[0]
    vocab, types = spec["input_ids"].high or 2, spec["token_type_ids"].high or 2
    out = {name: torch.zeros((samples, *spec[name].shape), dtype=torch.int32) for name in PACKED_INPUTS}
    out["mlm_labels"].fill_(-100)
    out["nsp_labels"].fill_(-100)
    for r in range(samples):
        count = int(torch.randint(1, per_pack + 1, (), generator=g))
        cuts = sorted(torch.randperm(seq - 1, generator=g)[: count - 1].add(1).tolist()) if count > 1 else []
        used = int(torch.randint(max(count, seq // 2), seq + 1, (), generator=g))
        bounds = [0] + [c for c in cuts if c < used] + [used]
        starts = bounds[:-1]
        slot = 0
        for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
            n = b - a
            out["input_ids"][r, a:b] = torch.randint(0, vocab, (n,), generator=g)
            out["token_type_ids"][r, a + n // 2:b] = min(1, types - 1)
            out["position_ids"][r, a:b] = torch.arange(n)
            out["sequence_ids"][r, a:b] = k + 1
            out["cls_positions"][r, k] = a
            out["nsp_labels"][r, k] = int(torch.randint(0, 2, (), generator=g))
            share = min(n, (masked - slot) // max(len(starts) - k, 1))
            out["mlm_positions"][r, slot:slot + share] = torch.arange(a, a + share)
            out["mlm_labels"][r, slot:slot + share] = torch.randint(0, vocab, (share,), generator=g)
            slot += share
    return [out[name] for name in PACKED_INPUTS]
