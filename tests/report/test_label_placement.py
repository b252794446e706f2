"""Labels placed beside crowded points overlap neither each other nor any marker."""
import itertools

from ipuexp.report.label_placement import _box, _overlap, place


def test_crowded_labels_do_not_pile_up():
    # A Pareto front climbing in small steps, with other points close by: every label wants the same corner.
    front = [(100.0 + 4 * i, 100.0 + 5 * i) for i in range(8)]
    others = [(104.0 + 4 * i, 96.0 + 5 * i) for i in range(8)]
    sizes = [(4.5 * len(str(n + 1)), 7.0) for n in range(len(front))]
    offsets = place(front, sizes, front + others, marker=6.0)
    boxes = [_box(x, y, dx, dy, w, h) for (x, y), (w, h), (dx, dy, _, _) in zip(front, sizes, offsets)]
    for a, b in itertools.combinations(boxes, 2):
        assert _overlap(a, b) == 0
    for box, (x, y) in itertools.product(boxes, front + others):
        assert _overlap(box, (x - 3, y - 3, x + 3, y + 3)) == 0


def test_alignment_puts_the_labels_corner_at_its_offset():
    (dx, dy, ha, va), = place([(0.0, 0.0)], [(5.0, 7.0)], [(0.0, 0.0)])
    assert (dx > 0, dy > 0, ha, va) == (True, True, "left", "bottom")


def test_a_label_stays_inside_the_plot():
    (dx, dy, _, _), = place([(100.0, 100.0)], [(5.0, 7.0)], [(100.0, 100.0)], bounds=(0.0, 0.0, 104.0, 104.0))
    assert dx < 0 and dy < 0  # the point sits in the top right corner: its label goes below left
