"""A checkpoint is written whole or not at all: a failed write (a full disk) leaves no temporary file behind."""
from __future__ import annotations

import errno
import os

import pytest

from ipuexp.training import checkpoint


def test_a_checkpoint_round_trips(tmp_path):
    path = checkpoint.save(tmp_path, 3, {"step": 3})
    assert checkpoint.latest(tmp_path) == path and path.name == "epoch_0003.pt"
    assert not [p for p in checkpoint.folder(tmp_path).iterdir() if p.name.endswith(".tmp")]


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        checkpoint.save(tmp_path, 1, {"step": 1})
    assert list(checkpoint.folder(tmp_path).iterdir()) == []
