"""Gantt chart and Chrome trace of one step, from simulated events."""
from __future__ import annotations

import json

import pytest

from ipuexp.emulator.pipeline import PipelineSpec, StageWork, simulate
from ipuexp.report.gantt import draw_gantt, gantt_figure
from ipuexp.report.trace import write_trace

PNG = b"\x89PNG\r\n\x1a\n"


def events(micro_batches: int, n_stages: int = 4):
    works = tuple(StageWork(stage=s, ipu=s, fwd_compute=1e-3, fwd_exchange=1e-4, bwd_compute=2e-3,
                            bwd_exchange=1e-4, recompute=1e-3 * (s < n_stages - 1), send_fwd_bytes=1e6,
                            send_bwd_bytes=1e6) for s in range(n_stages))
    spec = PipelineSpec(works, "grouped", micro_batches, True, link_bytes_per_s=64e9, sync_s=1e-6, io_s=2e-4)
    return simulate(spec, record_events=True).events


def test_gantt_png_of_a_short_pipeline(tmp_path):
    path = draw_gantt(events(8), tmp_path / "pipeline.png", title="toy")
    data = path.read_bytes()
    assert data.startswith(PNG) and len(data) > 10_000


def test_a_long_step_draws_its_ends_to_scale_and_sums_up_the_middle(tmp_path):
    evs = events(2048)
    fig = gantt_figure(evs, "toy")
    scaled = [ax for ax in fig.axes if ax.get_xlabel().startswith("time")]
    summed = [ax for ax in fig.axes if ax.get_xlabel().startswith("steady state")]
    assert len(scaled) == 2 and len(summed) == 1
    assert "micro-batches" in summed[0].get_xlabel() and "2,045 enter" in summed[0].get_xlabel()
    # Each IPU's share of the steady state; the last stage, busy every cycle, near 100%.
    busy = [t.get_text() for t in summed[0].texts]
    assert len(busy) == 4 and all(b.startswith("busy ") for b in busy)
    # Readable blocks: the first and the last micro-batches are labelled on their blocks, wide enough to read.
    first = {t.get_text() for t in scaled[0].texts}
    last = {t.get_text() for t in scaled[1].texts}
    assert {"F0", "B0"} <= first and ({"B2047"} <= last or {"2047"} <= last)
    for ax in scaled:
        lo, hi = ax.get_xlim()  # ms
        px_per_ms = ax.get_window_extent().width / (hi - lo)
        widths = [e.duration_s * 1e3 * px_per_ms for e in evs if e.category == "bwd" and lo <= e.start_s * 1e3 < hi]
        assert widths and min(widths) >= 10  # a backward pass is at least 10 pixels wide
    data = draw_gantt(evs, tmp_path / "long.png").read_bytes()
    assert data.startswith(PNG)


def test_chrome_trace_has_one_track_per_ipu(tmp_path):
    evs = events(6)
    doc = json.loads(write_trace(evs, tmp_path / "trace.json", title="toy").read_text())
    trace = doc["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in trace if e["name"] == "thread_name"}
    assert names == {0: "IPU 0", 1: "IPU 1", 2: "IPU 2", 3: "IPU 3"}
    complete = [e for e in trace if e["ph"] == "X"]
    passes = [e for e in evs if e.category in ("fwd", "bwd")]
    own_exchange = [e for e in evs if e.category == "exchange" and e.micro_batch >= 0]
    assert len(complete) == len(evs) - len(own_exchange)  # each pass's exchange folded into it
    assert {e["cat"] for e in complete} >= {"fwd", "bwd", "recompute", "exchange", "host_io"}
    first = min(complete, key=lambda e: e["ts"])
    assert first["ts"] == 0 and all(e["dur"] > 0 for e in complete)
    f0 = next(e for e in complete if e["cat"] == "fwd" and e["args"]["stage"] == 0 and e["args"]["micro_batch"] == 0)
    assert f0["dur"] == 1.1e3 and f0["args"]["exchange_us"] == 100.0  # microseconds: compute + exchange
    total = sum(e["dur"] for e in complete)
    assert total == pytest.approx(sum(e.duration_s for e in evs) * 1e6, rel=1e-6)
    assert len(passes) == 2 * 4 * 6


def test_gzip_trace(tmp_path):
    import gzip

    path = write_trace(events(6), tmp_path / "trace.json.gz")
    assert json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def test_a_host_call_is_not_busy_and_each_ipu_is_labelled_with_its_share_of_the_step():
    """IPUs waiting for a host call are not "busy" (host IO is waiting, as in the console's IPU utilisation); beside
    each IPU, its busy share of the whole step, the denominator the chart's title names."""
    from dataclasses import replace

    from ipuexp.emulator.events import Event
    from ipuexp.report.step_segments import Segment, shares

    pipe = events(64)
    end = max(e.start_s + e.duration_s for e in pipe)
    call = 5 * end
    evs = [Event(i, "host call", "host_io", 0.0, call) for i in range(4)] + [
        replace(e, start_s=e.start_s + call) for e in pipe]
    fig = gantt_figure(evs, "toy")
    host = [ax for ax in fig.axes if ax.get_xlabel() == "host call"]
    assert host and {t.get_text() for t in host[0].texts} == {"busy 0%"}
    step = shares(evs, Segment(0.0, call + end, True))
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    for ipu, label in enumerate(labels):
        busy = sum(v for k, v in step[ipu].items() if k != "host_io")
        assert label == f"IPU {ipu}\nbusy {busy:.0%}" and busy < 0.2
    assert "of the whole step (the console's IPU utilisation)" in fig._suptitle.get_text()
