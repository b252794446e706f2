"""A sweep report's option axis gives each value a tick only where the labels do not run into each other."""
from __future__ import annotations

from matplotlib.figure import Figure

from ipuexp.report.sweep_plots import option_axis


def _labels(values):
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    option_axis(ax, values)
    fig.canvas.draw() if hasattr(fig.canvas, "draw") else None
    return [t.get_text() for t in ax.get_xticklabels()]


def test_close_values_get_plain_ticks():
    labels = _labels(["0.1593", "0.1648", "0.1759", "0.3918"])
    assert "0.1648" not in labels and "0.1593" not in labels


def test_spread_values_keep_a_tick_each():
    assert _labels(["512", "1024", "2048"]) == ["512", "1024", "2048"]
    assert _labels(["0", "32", "64"]) == ["0", "32", "64"]
    assert _labels(["0.1", "0.2", "0.3", "0.4"]) == ["0.1", "0.2", "0.3", "0.4"]
