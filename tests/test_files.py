"""Files written whole or not at all (``ipuexp.files``): a failed write keeps the previous file and leaves no
temporary one."""
from __future__ import annotations

import errno
import gzip
import os

import pytest

from ipuexp.files import savefig_whole, whole, write_whole


def test_a_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = write_whole(tmp_path / "trace.json.gz", gzip.compress(b"{}"))
    with pytest.raises(OSError):
        with whole(path) as tmp:
            tmp.write_bytes(b"half")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert gzip.decompress(path.read_bytes()) == b"{}" and os.listdir(tmp_path) == ["trace.json.gz"]


def test_a_figure_is_saved_in_the_format_its_name_says(tmp_path):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(1, 1))
    savefig_whole(fig, tmp_path / "chart.png", dpi=20)
    assert (tmp_path / "chart.png").read_bytes().startswith(b"\x89PNG") and os.listdir(tmp_path) == ["chart.png"]
