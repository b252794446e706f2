"""A long step cut into stretches: its ends to scale, the steady state and any long host call summed up."""
from dataclasses import replace

import pytest

from ipuexp.emulator.events import Event
from ipuexp.emulator.pipeline import PipelineSpec, StageWork, simulate
from ipuexp.report.step_segments import EDGE_MICRO_BATCHES, SUM_ABOVE, segments, shares


def events(micro_batches: int):
    works = tuple(StageWork(stage=s, ipu=s, fwd_compute=1e-3, fwd_exchange=1e-4, bwd_compute=2e-3, bwd_exchange=1e-4,
                            recompute=1e-3 * (s < 3), send_fwd_bytes=1e6, send_bwd_bytes=1e6) for s in range(4))
    spec = PipelineSpec(works, "grouped", micro_batches, True, link_bytes_per_s=64e9, sync_s=1e-6, io_s=2e-4)
    return simulate(spec, record_events=True).events


def test_a_short_step_is_drawn_to_scale_whole():
    evs = events(SUM_ABOVE)
    (part,) = segments(evs)
    assert not part.summed and part.start_s == 0 and part.end_s == max(e.start_s + e.duration_s for e in evs)


def test_a_long_step_keeps_its_first_and_last_micro_batches_to_scale():
    n = 2048
    evs = events(n)
    head, middle, tail = segments(evs)
    assert (head.summed, middle.summed, tail.summed) == (False, True, False)
    assert head.end_s == middle.start_s and middle.end_s == tail.start_s
    ends = [e.start_s + e.duration_s for e in evs]
    assert head.start_s == 0 and tail.end_s == max(ends)
    for e, end in zip(evs, ends):
        if 0 <= e.micro_batch < EDGE_MICRO_BATCHES:
            assert end <= head.end_s  # the first micro-batches whole in the head
        if e.micro_batch >= n - EDGE_MICRO_BATCHES:
            assert e.start_s >= tail.start_s  # the last ones whole in the tail
    assert middle.duration_s > 0.95 * max(ends)  # nearly all of the step is the steady state
    assert "steady state" in middle.label and f"{n - EDGE_MICRO_BATCHES - 1:,} enter" in middle.label
    busy = shares(evs, middle)
    assert sorted(busy) == [0, 1, 2, 3]
    for cats in busy.values():
        assert 0 < sum(cats.values()) <= 1 + 1e-9
    # The slowest stages (those that recompute) set the pace: in steady state they never wait.
    assert max(sum(cats.values()) for cats in busy.values()) == pytest.approx(1.0, abs=0.05)
    assert sum(busy[3].values()) < 0.9


def test_a_host_call_that_would_squeeze_the_passes_is_summed_up():
    call = 0.5
    evs = [Event(i, "host call", "host_io", 0.0, call) for i in range(4)]
    evs += [replace(e, start_s=e.start_s + call) for e in events(8)]
    host, rest = segments(evs)
    assert host.summed and host.label == "host call" and (host.start_s, host.end_s) == (0.0, call)
    assert not rest.summed and rest.start_s == call
    short = [Event(i, "host call", "host_io", 0.0, 1e-4) for i in range(4)]
    short += [replace(e, start_s=e.start_s + 1e-4) for e in events(8)]
    (whole,) = segments(short)  # a short host call stays in the picture, to scale
    assert whole.start_s == 0.0
