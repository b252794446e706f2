"""Objects that exist before a chart is drawn are left out of collections meanwhile, and only then."""
from __future__ import annotations

import gc

from ipuexp.report.gc_freeze import existing_objects_frozen


def test_frozen_while_drawing_and_not_after():
    assert gc.get_freeze_count() == 0
    with existing_objects_frozen():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_a_freeze_made_by_the_caller_is_left_alone():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with existing_objects_frozen():
            pass
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_unfrozen_when_drawing_fails():
    try:
        with existing_objects_frozen():
            raise RuntimeError("drawing failed")
    except RuntimeError:
        pass
    assert gc.get_freeze_count() == 0
