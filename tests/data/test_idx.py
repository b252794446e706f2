"""IDX decoding: synthetic files of every layout, malformed files, and the real MNIST test set."""
from __future__ import annotations

import gzip
import hashlib
import struct
from pathlib import Path

import numpy as np
import pytest

from ipuexp.data import PACKAGED_MNIST
from ipuexp.data.idx import IDXError, parse_idx, read_idx

MNIST = PACKAGED_MNIST


def idx_bytes(array: np.ndarray, code: int) -> bytes:
    header = bytes([0, 0, code, array.ndim]) + b"".join(struct.pack(">I", d) for d in array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


@pytest.mark.parametrize("dtype,code", [(np.uint8, 0x08), (np.int8, 0x09), (np.int16, 0x0B), (np.int32, 0x0C),
                                        (np.float32, 0x0D), (np.float64, 0x0E)])
def test_round_trip_every_type(dtype, code):
    a = (np.arange(2 * 3 * 4) - 7).astype(dtype).reshape(2, 3, 4)
    if dtype == np.uint8:
        a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    out = parse_idx(idx_bytes(a, code))
    assert out.shape == (2, 3, 4)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, a)


def test_gzip_and_plain_files_read_alike(tmp_path):
    a = np.arange(10, dtype=np.uint8)
    raw = idx_bytes(a, 0x08)
    (tmp_path / "plain").write_bytes(raw)
    with gzip.open(tmp_path / "packed.gz", "wb") as f:
        f.write(raw)
    np.testing.assert_array_equal(read_idx(tmp_path / "plain"), a)
    np.testing.assert_array_equal(read_idx(tmp_path / "packed.gz"), a)


@pytest.mark.parametrize("raw,message", [
    (b"\x01\x00\x08\x01\x00\x00\x00\x01\x05", "first two bytes"),
    (b"\x00\x00\x07\x01\x00\x00\x00\x01\x05", "unknown IDX type code 0x07"),
    (b"\x00\x00\x08\x02\x00\x00\x00\x01", "truncated header"),
    (b"\x00\x00\x08\x01\x00\x00\x00\x03\x05", "expected 11 for shape (3,)"),
])
def test_malformed_files_are_named(raw, message):
    with pytest.raises(IDXError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_idx(raw, "bad-file")


@pytest.mark.skipif(not MNIST.is_dir(), reason="the packaged MNIST test set is missing")
def test_real_mnist_test_set():
    images = read_idx(MNIST / "t10k-images-idx3-ubyte.gz")
    labels = read_idx(MNIST / "t10k-labels-idx1-ubyte.gz")
    # md5 of the distributed files (shared/README.md)
    assert hashlib.md5((MNIST / "t10k-images-idx3-ubyte.gz").read_bytes()).hexdigest() == \
        "9fb629c4189551a2d022fa330f9573f3"
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (10000,)
    # digits per class in the official test set (LeCun et al.'s distribution)
    assert np.bincount(labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert images.max() == 255 and images.min() == 0
