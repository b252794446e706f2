"""The trace and the Gantt chart read a step's events as the simulation writes them (columns), to the same bytes as
from one object per event."""
from __future__ import annotations

import numpy as np

from ipuexp.emulator.pipeline import PipelineSpec, StageWork, simulate_rows
from ipuexp.emulator.timing import _step_rows, IPUStep
from ipuexp.report.event_columns import Columns
from ipuexp.report.gantt import draw_gantt
from ipuexp.report.trace import write_trace


def step(micro_batches: int):
    works = tuple(StageWork(stage=s, ipu=s, fwd_compute=1e-3, fwd_exchange=1e-4, bwd_compute=2e-3,
                            bwd_exchange=1e-4, recompute=1e-3 * (s < 3), send_fwd_bytes=1e6, send_bwd_bytes=1e6)
                  for s in range(4))
    spec = PipelineSpec(works, "grouped", micro_batches, True, link_bytes_per_s=64e9, sync_s=1e-6, io_s=2e-4)
    pipe = simulate_rows(spec)
    ipus = [IPUStep(i, pipe.busy[i], weight_update=3e-4, all_reduce=2e-4 * (i > 0)) for i in range(4)]
    return _step_rows(pipe.rows, ipus, pipe.time_s, host_call=5e-5)


def test_columns_from_rows_are_the_columns_of_the_objects():
    rows = step(64)
    a, b = Columns(rows), Columns(rows.events())
    assert a.kinds == b.kinds
    for name in ("cat", "ipu", "start", "dur", "stage", "mb"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    everywhere = np.arange(len(a))
    assert a.names(everywhere) == b.names(everywhere)
    kept = a.dur > 1.5e-4
    assert a.where(kept).names(everywhere[: kept.sum()]) == b.where(kept).names(everywhere[: kept.sum()])


def test_the_trace_and_the_gantt_chart_are_the_same_from_rows(tmp_path):
    rows = step(2048)  # long enough for the chart's summed-up middle
    events = rows.events()
    assert write_trace(rows, tmp_path / "rows.json.gz", title="t").read_bytes() == \
        write_trace(events, tmp_path / "objects.json.gz", title="t").read_bytes()
    assert draw_gantt(rows, tmp_path / "rows.png", title="t").read_bytes() == \
        draw_gantt(events, tmp_path / "objects.png", title="t").read_bytes()
