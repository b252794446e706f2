"""A family whose every calibration row is unexplained: the band covers that error wherever the family runs,
without growing it with the distance."""
from __future__ import annotations

import pytest

from ipuexp.calibration.band import Point, Residual, compounded, error_band


def _row(id_, family, loo, fitted=True, ipr=4, tokens=4096.0, samples=65536.0, framework="poptorch", mbs=8):
    return Residual(id_, family, "bow", 16, mbs, 512, loo, fitted, ipr, tokens, "tokens", samples, 0.2, framework,
                    lofo_error_pct=loo * 2)


ROWS = [_row("a", "bert", 2.0), _row("b", "bert", -4.0, samples=8192.0), _row("r", "resnet", 3.0),
        _row("v", "vit", 44.0, fitted=False, tokens=3349.0, samples=16320.0, mbs=17)]


def test_an_unexplained_family_takes_twice_its_error_and_not_more_with_distance():
    at_row = error_band("vit", 16, 17, 30, residuals=ROWS, point=ROWS[3].point)
    far = Point(4, 1576.0, "tokens", 65536.0, 0.2, 64, "poptorch")
    away = error_band("vit", 64, 8, 512, residuals=ROWS, point=far)
    # twice +44% on the scale errors multiply on: 1.44 x 1.44 = 2.07x
    assert at_row.pct == pytest.approx(107.36) and away.pct == pytest.approx(107.36)
    assert any("vit rows' error is not explained (+44% of v)" in r for r in away.reasons)
    assert any("no calibration row of the vit family the model explains" in r for r in away.reasons)
    # Without the floor the distance alone would widen it: the band grows only where it exceeds the floor.
    assert away.distance > 0


def test_an_explained_family_is_not_floored_by_another_familys_error():
    band = error_band("bert-base", 16, 8, 512, residuals=ROWS, point=ROWS[0].point)
    assert band.pct < 10.0 and not any("not explained" in r for r in band.reasons)


@pytest.mark.parametrize("error, band", [(44.0, 107.36), (20.0, 44.0), (-20.0, 36.0), (2.0, 4.04), (0.0, 0.0)])
def test_compounded_is_twice_the_error_as_a_factor(error, band):
    assert compounded(error) == pytest.approx(band)
    # near zero, twice the error as the other bands take it
    assert abs(compounded(error) - 2 * abs(error)) <= 0.02 * abs(error) or abs(error) > 10
