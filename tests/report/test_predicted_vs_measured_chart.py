"""``predicted_vs_measured.png``: runs at the same spot are told apart, and a band of 100% or more stays on the log
axis (it has no upper end: an arrow at the top of the axis)."""
from __future__ import annotations

from pathlib import Path

import pytest

from ipuexp.report.predicted_vs_measured import band_ends, plot_measured
from ipuexp.report.sweep import Point, Sweep


def _point(n: int, predicted: float, band: float, measured: float) -> Point:
    return Point(f"r{n}", f"run {n}", {}, throughput=predicted, peak_memory=None, fits=True, error_band_pct=band,
                 measured=measured, measured_on="ipu")


def test_band_ends():
    low, high = band_ends(_point(0, 1000.0, 10.0, 1000.0))
    assert low == pytest.approx(1000.0 / 1.1) and high == pytest.approx(1000.0 / 0.9)
    low, high = band_ends(_point(0, 1000.0, 104.0, 1000.0))
    assert low == pytest.approx(1000.0 / 2.04) and high is None


def test_chart_with_twin_runs_and_a_wide_band(tmp_path: Path, monkeypatch):
    import matplotlib.axes

    drawn = []
    real = matplotlib.axes.Axes.errorbar

    def spy(self, x, y, yerr=None, **kw):
        drawn.append((x[0], y[0], yerr, kw.get("fmt"), kw.get("markersize")))
        return real(self, x, y, yerr=yerr, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", spy)
    pts = [_point(1, 10_610.0, 150.0, 7615.0), _point(2, 10_610.0, 150.0, 7615.0), _point(3, 7905.0, 30.0, 7000.0)]
    path = plot_measured(Sweep("vit_b16", pts), tmp_path / "predicted_vs_measured.png")
    assert path.exists()
    (_, _, err1, fmt1, size1), (_, _, err2, fmt2, size2), (_, y3, err3, _, _) = drawn
    assert fmt1 != fmt2 and size1 > size2           # the twins: two markers, the second smaller, both visible
    # the wide band: down to 10,610 / 2.5, and up to the top of the axis, not to a far upper end
    assert all(e[0][0] == pytest.approx(10_610.0 - 10_610.0 / 2.5) for e in (err1, err2))
    assert all(0 < e[1][0] < 10_610.0 for e in (err1, err2))
    assert err3[0][0] == pytest.approx(y3 - 7905.0 / 1.3) and err3[1][0] == pytest.approx(7905.0 / 0.7 - y3)
