"""The trace written in a forked process is the file ``write_trace`` writes, and a failed child is made good."""
from __future__ import annotations

import os

from ipuexp.emulator.pipeline import PipelineSpec, StageWork, simulate
from ipuexp.report import trace
from ipuexp.report.trace import write_trace, write_trace_aside


def events(micro_batches: int = 16):
    works = tuple(StageWork(stage=s, ipu=s, fwd_compute=1e-3, fwd_exchange=1e-4, bwd_compute=2e-3,
                            bwd_exchange=1e-4, send_fwd_bytes=1e6, send_bwd_bytes=1e6) for s in range(3))
    spec = PipelineSpec(works, "grouped", micro_batches, True, link_bytes_per_s=64e9, sync_s=1e-6, io_s=2e-4)
    return simulate(spec, record_events=True).events


def test_the_forked_trace_is_the_same_file(tmp_path):
    evs = events()
    join = write_trace_aside(evs, tmp_path / "aside.json.gz", title="toy")
    path = join()
    assert path == tmp_path / "aside.json.gz"
    assert path.read_bytes() == write_trace(evs, tmp_path / "here.json.gz", title="toy").read_bytes()


def test_a_child_that_fails_is_made_good_in_this_process(tmp_path, monkeypatch):
    evs = events()
    pid = os.getpid()
    real = trace.write_trace

    def fails_in_child(*args, **kwargs):
        if os.getpid() != pid:
            raise RuntimeError("child failed")
        return real(*args, **kwargs)

    monkeypatch.setattr(trace, "write_trace", fails_in_child)
    path = write_trace_aside(evs, tmp_path / "t.json", title="toy")()
    assert path.read_bytes() == real(evs, tmp_path / "ref.json", title="toy").read_bytes()


def test_the_trace_is_the_text_json_writes_for_its_events(tmp_path):
    """``write_trace`` formats each event itself: the bytes are ``json.dumps`` of the trace document."""
    import json

    evs = events(40) + [trace.Event(0, "weight update \"é\"", "weight_update", 0.25, 1e-3)]
    title = "BERT «toy»"
    doc = {"traceEvents": trace.trace_events(evs, title), "displayTimeUnit": "ms",
           "otherData": {"generator": "ipuexp", "title": title}}
    assert any("exchange_us" in e.get("args", {}) for e in doc["traceEvents"])
    written = write_trace(evs, tmp_path / "t.json", title=title).read_bytes()
    assert written == json.dumps(doc, separators=(",", ":")).encode()
