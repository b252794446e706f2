"""``python -m ipuexp.plan --help`` lists every ``plan.*`` key with its default and what it does."""
from __future__ import annotations

import dataclasses

import pytest

from ipuexp.commands.plan import parse
from ipuexp.plan.settings import PlanConfig


def test_help_lists_every_plan_key(capsys):
    with pytest.raises(SystemExit) as done:
        parse(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    for f in dataclasses.fields(PlanConfig):
        assert f"plan.{f.name} [" in text, f.name
    assert "plan.headroom [0.05]: Share of tile memory that must stay free" in text


def test_help_fits_80_columns_without_rest_markup(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        parse(["--help"])
    text = capsys.readouterr().out
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "``" not in text and ":class:" not in text
    assert "python -m ipuexp.plan +recipe=NAME [overrides] [plan.KEY=VALUE ...]: the fastest" in text
