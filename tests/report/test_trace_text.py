"""The trace text built over numpy columns is, byte for byte, the text formatted event by event."""
from __future__ import annotations

import random

import numpy as np
import pytest

from ipuexp.emulator.events import Event
from ipuexp.report import trace
from ipuexp.report.trace_text import _round3, trace_text


def by_event(events):
    return ",".join(trace._json_events(trace._merged(events)))


def columns(events):
    return trace_text(events, lambda ipus: f"{ipus}|", "|end")


def test_round3_is_pythons_round_on_halves_and_edges():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.random(20000) * 10 ** rng.uniform(-3, 9, 20000),
        (rng.integers(0, 10 ** 9, 20000) + 0.5) / 1000,  # decimal halves, rarely exact in binary
        rng.integers(0, 2 ** 20, 20000) / 2.0 ** rng.integers(1, 20, 20000),  # binary fractions: exact halves
        np.nextafter((rng.integers(0, 10 ** 8, 20000) + 0.5) / 1000, np.inf),
        np.nextafter((rng.integers(0, 10 ** 8, 20000) + 0.5) / 1000, -np.inf),
        [0.0, -0.0, -1e-9, 1e-9, 0.0005, 0.0015, 2.675, 1e15, 1e17, np.inf, -np.inf, -2.5e-4, 5e-324],
    ])
    r, k, exact = _round3(x)
    expected = np.array([round(v, 3) for v in x.tolist()])
    assert (r.view(np.int64) == expected.view(np.int64)).all()
    assert (k[exact] == np.round(expected[exact] * 1000)).all()


def steps(rng: random.Random, n: int, zero: float = 0.0):
    """Passes, each with its exchange right after (sometimes a little apart), host IO and others, on a few IPUs;
    ``zero``: the shortest (a pass of none may sort after its own exchange, and then two exchanges follow a pass)."""
    events, t = [], {}
    for i in range(n):
        ipu = rng.randrange(4)
        at = t.get(ipu, rng.choice([0.0, 1e-7, 12.5]))
        mb, stage = rng.randrange(-1, 300), rng.randrange(-1, 4)
        cat = rng.choice(["fwd", "bwd", "recompute", "host_io", "exchange", "weight_update"])
        if cat == "exchange":
            mb = -1  # a sync of no micro-batch: never merged (one after a merged exchange would be a chain)
        d = rng.choice([zero, 1.5e-6, 2.0005e-6, 3.4e-5, rng.random() * 1e-3, 53.59e-3])
        name = rng.choice([f"F{stage} mb{mb}", "sync + inter-IPU copy", "host call", 'w "ü"\n'])
        events.append(Event(ipu, name, cat, at, d, stage, mb))
        at += d
        if cat in ("fwd", "bwd") and rng.random() < 0.7:
            gap = rng.choice([0.0, 0.0, 2e-9, 5e-9])
            x = rng.choice([zero, 1e-6, 13.474e-6, rng.random() * 1e-5])
            events.append(Event(ipu, "exchange", "exchange", at + gap, x, stage, mb))
            at += gap + x
        t[ipu] = at + rng.choice([0.0, 1e-6])
    return events


@pytest.mark.parametrize("seed", range(6))
def test_columns_match_event_by_event(seed):
    rng = random.Random(seed)
    events = steps(rng, 3000, zero=1e-9 * (seed % 2))
    if seed % 2:
        rng.shuffle(events)  # not in time order on each IPU
    ipus = sorted({e.ipu for e in events})
    text = by_event(events)
    assert '"exchange_us"' in text
    assert columns(events) == f"{ipus}|" + text + "|end"


def test_what_columns_do_not_do_exactly_is_left_to_the_caller():
    chain = [Event(0, "F0 mb0", "fwd", 0.0, 1e-3, 0, 0), Event(0, "x", "exchange", 1e-3, 1e-4, 0, 0),
             Event(0, "x", "exchange", 1.1e-3, 1e-4, 0, 0)]
    assert columns(chain) is None
    assert columns([Event(0, "F0 mb0", "fwd", float("nan"), 1e-3, 0, 0)]) is None
    assert columns([]) == "[]||end"


def test_write_trace_is_the_same_either_way(tmp_path):
    events = steps(random.Random(7), 2000)
    written = trace.write_trace(events, tmp_path / "t.json", title="toy").read_text()
    ipus = sorted({e.ipu for e in events})
    head = ",".join(trace.json.dumps(d, separators=(",", ":")) for d in trace._header(ipus, "toy"))
    assert written.startswith('{"traceEvents":[' + head + "," + by_event(events) + "]")
