"""What a refit says about the measured runs: still far off (``far_off``), or close only through themselves
(``self_explained``: their leave-one-out prediction stays far off)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from ipuexp.calibration import family
from ipuexp.fitting.refit import Line, Refit


def _line(model: str, published: float, after: float, loo: float) -> Line:
    row = SimpleNamespace(model=model, family=family(model), published=published)
    return Line(case=SimpleNamespace(row=row), before=published * 1.4, after=after, loo=loo)


def _refit(*lines: Line) -> Refit:
    return Refit(mode="shipped+measured", replaced={}, constants={}, mine=list(lines), shipped=[])


def test_a_run_close_only_through_itself_is_named_with_its_leave_one_out_error():
    result = _refit(_line("vit_b16", 100.0, after=101.0, loo=138.0), _line("bert_base", 100.0, after=102.0, loo=104.0))
    [(fam, after, loo)] = result.self_explained()
    assert (fam, after, loo) == ("vit", pytest.approx(1.0), pytest.approx(38.0))
    assert result.far_off() == []


def test_a_run_still_far_off_is_far_off_not_self_explained():
    result = _refit(_line("gpt2_medium", 100.0, after=125.0, loo=126.0))
    [(fam, median)] = result.far_off()
    assert (fam, median) == ("gpt", pytest.approx(25.0))
    assert result.self_explained() == []
