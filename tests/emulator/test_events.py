"""A step's events as the simulation writes them (columns over a table of parts) and as objects."""
from __future__ import annotations

import pytest

from ipuexp.emulator.events import Event, EventRows
from ipuexp.emulator.pipeline import PipelineSpec, StageWork, simulate, simulate_rows


def spec(micro_batches: int = 6) -> PipelineSpec:
    works = tuple(StageWork(stage=s, ipu=s, fwd_compute=1e-3, fwd_exchange=1e-4 * (s > 0), bwd_compute=2e-3,
                            bwd_exchange=1e-4, recompute=1e-3 * (s == 0), send_fwd_bytes=1e6, send_bwd_bytes=1e6)
                  for s in range(3))
    return PipelineSpec(works, "grouped", micro_batches, True, link_bytes_per_s=64e9, sync_s=1e-6, io_s=2e-4)


def test_the_rows_name_each_pass_and_its_micro_batch():
    rows = simulate_rows(spec()).rows
    events = rows.events()
    assert len(events) == len(rows) > 0
    names = {e.name for e in events}
    assert {"host IO mb0", "F0 mb0", "F1 mb5 exchange", "R0 mb2", "B2 mb3", "B2 mb3 exchange",
            "sync + inter-IPU copy"} <= names
    assert "F0 mb0 exchange" not in names  # a part of zero seconds records no event
    sync = [e for e in events if e.name == "sync + inter-IPU copy"]
    assert sync and all(e.stage == -1 and e.micro_batch == -1 and e.category == "exchange" for e in sync)
    f = next(e for e in events if e.name == "F1 mb5 exchange")
    assert (f.stage, f.micro_batch, f.category) == (1, 5, "exchange")


def test_simulate_with_events_gives_the_rows_as_objects():
    s = spec()
    assert simulate(s, record_events=True).events == simulate_rows(s).rows.events()
    timed, stepped = simulate(s), simulate_rows(s)  # the same cycles, summed in another order
    assert stepped.time_s == pytest.approx(timed.time_s, rel=1e-12) and stepped.cycles == timed.cycles


def test_extend_moves_each_start_by_one_float_addition_and_renumbers_parts():
    a, b = EventRows(), EventRows()
    pa = a.add_part("host call", "", "host_io", False)
    a.add(0, pa, 0.0, 0.1)
    pb = b.add_part("F0 mb", "", "fwd", True)
    b.add(0, pb, 0.1, 0.2, 0, 4)
    b.add(1, pb, 0.7, 0.2, 0, 5)
    a.extend(b, shift=0.1)
    assert a.events() == [Event(0, "host call", "host_io", 0.0, 0.1),
                          Event(0, "F0 mb4", "fwd", 0.1 + 0.1, 0.2, 0, 4),
                          Event(1, "F0 mb5", "fwd", 0.7 + 0.1, 0.2, 0, 5)]
