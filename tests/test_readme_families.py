"""The README's table of Optimum Graphcore's model families is what the code predicts for each
(``benchmarks/family_table.py``): every family splits, runs and prints the figures the README shows."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]


def _table_module():
    spec = importlib.util.spec_from_file_location("family_table", ROOT / "benchmarks" / "family_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _readme_rows() -> dict:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- families -->\n(.*?)\n<!-- /families -->", text, re.S).group(1)
    return {line.split("|")[1].strip(): line for line in block.splitlines()[2:]}


@pytest.mark.slow
def test_every_family_row_is_what_the_code_predicts(monkeypatch):
    monkeypatch.chdir(ROOT)  # the ipu_config.json paths and examples.groupbert are the repository's
    monkeypatch.syspath_prepend(str(ROOT))
    table = _table_module()
    rows = _readme_rows()
    assert list(rows) == list(table.FAMILIES) and len(rows) == 16
    for family in table.FAMILIES:
        assert rows[family] == table.row(family), family
