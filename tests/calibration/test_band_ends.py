"""The band bounds the prediction's error, predicted / measured - 1, the statistic the bands are made of."""
import pytest

from ipuexp.calibration.band import COVERAGE_K
from ipuexp.calibration.band_ends import band_ends, error_pct, inside


def test_error_is_positive_when_the_prediction_promised_too_much():
    assert error_pct(10_549.0, 7_319.0) == pytest.approx(44.13, abs=0.01)  # ViT-B/16 fine-tuning
    assert error_pct(900.0, 1000.0) == pytest.approx(-10.0)


@pytest.mark.parametrize("band", [3.0, 10.0, 40.0, 88.0, 99.0])
def test_the_ends_are_where_the_error_reaches_the_band(band):
    low, high = band_ends(1000.0, band)
    assert error_pct(1000.0, low) == pytest.approx(band) and error_pct(1000.0, high) == pytest.approx(-band)
    assert inside(1000.0, low, band) and inside(1000.0, high, band)
    assert not inside(1000.0, low * 0.999, band) and not inside(1000.0, high * 1.001, band)


def test_a_band_of_100_percent_or_more_has_a_lower_end_and_no_upper_one():
    low, high = band_ends(1000.0, 150.0)
    assert low == pytest.approx(400.0) and high is None
    assert inside(1000.0, 1e9, 150.0) and not inside(1000.0, 399.0, 150.0)


def test_a_row_twice_as_far_off_as_its_band_is_outside_it():
    # A band of COVERAGE_K times a row's error holds that row, whichever way it is off.
    for error in (44.0, -30.0):
        measured = 1000.0 / (1 + error / 100)
        assert inside(1000.0, measured, COVERAGE_K * abs(error))
        assert not inside(1000.0, measured, abs(error) / COVERAGE_K)
