"""Cyclic garbage collection kept off the objects that exist before a chart (or the trace) is made, and paused while
a step's events are made.

A long step's charts are made next to its events: hundreds of thousands of objects that every full collection
walks. Matplotlib allocates enough while drawing to set one off (a tenth of a second or more, longer than some
charts take). Frozen (``gc.freeze``) meanwhile, they are left out of every collection; what the drawing allocates
is collected as usual.
"""
from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def existing_objects_frozen() -> Iterator[None]:
    if gc.get_freeze_count():  # someone else froze objects: leave the freeze to them
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic collection in the block: the hundreds of thousands of events of a long step hold no cycles, and
    the collections their allocation sets off walk them again and again (half the time making them takes)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
