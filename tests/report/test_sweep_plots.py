"""Sweep charts a reader can take in: ticks at the values swept, numbered Pareto points that do not pile up."""
import itertools

from matplotlib.figure import Figure

from ipuexp.report.sweep import Point, Sweep, pareto_front, swept_options
from ipuexp.report.sweep_plots import option_axis, pareto_figure


def _ticks(values):
    fig = Figure()
    ax = fig.add_subplot()
    xs = option_axis(ax, values)
    ax.plot(xs, range(len(xs)))
    fig.draw_without_rendering()
    return xs, [t.get_text() for t in ax.get_xticklabels()], ax


def test_an_integer_option_gets_integer_ticks():
    xs, labels, _ = _ticks(["0", "32", "64", "96", "128"])
    assert labels == ["0", "32", "64", "96", "128"]
    for many in (range(1, 41), range(0, 400, 20)):  # too many for a tick each: on a log axis, then a linear one
        _, labels, ax = _ticks([str(n) for n in many])
        lo, hi = ax.get_xlim()
        shown = [(t, label) for t, label in zip(ax.get_xticks(), labels) if lo <= t <= hi]
        assert len(shown) >= 3
        assert all(float(t).is_integer() and label.replace(",", "").isdigit() for t, label in shown)
    _, labels, _ = _ticks(["1", "4", "16", "64"])  # powers of two: a log2 axis, ticks at the values
    assert labels == ["1", "4", "16", "64"]


def test_scalars_and_lists_of_one_key_get_short_ordered_ticks():
    values = ["[0.3, 0.5, 0.5, 0.5]", "0.3", "[0.15, 0.25, 0.25, 0.25]", "0.2", "0.3"]
    xs, labels, _ = _ticks(values)
    assert labels == ["0.2", "0.3", "[0.15, 0.25 x3]", "[0.3, 0.5 x3]"]
    assert xs == [3.0, 1.0, 2.0, 0.0, 1.0]


def test_pareto_numbers_do_not_pile_up():
    # 85 runs whose front climbs in small steps: each front point is numbered, no two numbers overlap.
    pts = [Point(f"r{i}", f"gradient_accumulation={ga},num_io_tiles={io}",
                 {"options.gradient_accumulation": str(ga), "options.io.num_io_tiles": str(io)},
                 3000.0 + 9.0 * i + (i % 5) * 3.0, (700.0 + 1.2 * i) * 2**20, i < 70, sweep_id="s")
           for i, (ga, io) in enumerate(itertools.product(range(1, 18), (0, 32, 64, 96, 128)))]
    sweep = Sweep("bert_large", pts, options=swept_options(pts), capacity=897 * 2**20)
    fig = pareto_figure(sweep)
    fig.draw_without_rendering()
    ax = fig.axes[0]
    numbers = [t for t in ax.texts if t.get_text().isdigit()]
    front = len(pareto_front(pts))
    assert front > 40
    shown = sorted(int(t.get_text()) for t in numbers)  # a long front: evenly spaced points, first and last
    assert 10 <= len(shown) <= 21 and shown[0] == 1 and shown[-1] == front
    boxes = [t.get_window_extent() for t in numbers]
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b)
    key = fig.axes[1].texts[0].get_text()
    assert key.startswith("Pareto front\n") and "\n1: gradient_accumulation=1 num_io_tiles=0" in key
    assert "20 of its 57 points numbered (ringed)" in key
    assert ax.get_xlabel() == "peak memory of the fullest IPU (MiB)"
