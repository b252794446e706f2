"""One step as a Chrome trace (``chrome://tracing``, https://ui.perfetto.dev): one track per IPU of a replica.

Format: the Trace Event Format's complete events (``"ph": "X"``, microsecond ``ts``/``dur``) plus ``thread_name``
metadata naming each track. A pass and the exchange that closes it are one event (the exchange share is in its
``args``), which halves the size of long steps; a path ending in ``.gz`` is written gzip-compressed (both viewers
open it as it is), with no time stamp in its header, so the same step gives the same bytes.
"""
from __future__ import annotations

import functools
import gzip
import json
from json.encoder import encode_basestring_ascii
from operator import attrgetter
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Union

from ipuexp.emulator.events import Event, EventRows
from ipuexp.files import write_whole
from ipuexp.report.gc_freeze import existing_objects_frozen
from ipuexp.report.trace_text import trace_text


def _merged(events: Iterable[Event]) -> List[list]:
    """Complete events as ``[name, category, ipu, ts_us, dur_us, stage, micro_batch, exchange_us]``, each pass's own
    exchange folded into it (``exchange_us`` None where none was)."""
    out: List[list] = []
    last: Dict[int, list] = {}
    for e in sorted(events, key=attrgetter("ipu", "start_s")):
        ipu, mb = e.ipu, e.micro_batch
        ts, dur = round(e.start_s * 1e6, 3), round(e.duration_s * 1e6, 3)
        if mb >= 0 and e.category == "exchange":
            prev = last.get(ipu)
            if prev is not None and prev[6] == mb and prev[5] == e.stage and -1e-3 < prev[3] + prev[4] - ts < 1e-3:
                prev[4] = round(prev[4] + dur, 3)
                prev[7] = dur
                continue
        ev = [e.name, e.category, ipu, ts, dur, e.stage, mb, None]
        out.append(ev)
        last[ipu] = ev
    return out


def _as_dict(m: list) -> dict:
    name, cat, ipu, ts, dur, stage, mb, exchange = m
    args: dict = {}
    if stage >= 0:
        args["stage"] = stage
    if mb >= 0:
        args["micro_batch"] = mb
    if exchange is not None:
        args["exchange_us"] = exchange
    return {"name": name, "cat": cat, "ph": "X", "pid": 0, "tid": ipu, "ts": ts, "dur": dur, "args": args}


def _header(ipus: Iterable[int], process_name: str) -> List[dict]:
    out: List[dict] = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": process_name}}]
    for i in ipus:
        out.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": i, "args": {"name": f"IPU {i}"}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": i, "args": {"sort_index": i}})
    return out


def trace_events(events: Iterable[Event], process_name: str = "replica 0") -> List[dict]:
    events = list(events)
    return _header(sorted({e.ipu for e in events}), process_name) + [_as_dict(m) for m in _merged(events)]


def _json_events(merged: List[list]) -> Iterator[str]:
    """``json.dumps`` of each ``_as_dict`` (compact separators), formatted directly."""
    text, number = encode_basestring_ascii, float.__repr__
    for name, cat, ipu, ts, dur, stage, mb, exchange in merged:
        args = []
        if stage >= 0:
            args.append(f'"stage":{stage}')
        if mb >= 0:
            args.append(f'"micro_batch":{mb}')
        if exchange is not None:
            args.append(f'"exchange_us":{number(exchange)}')
        yield (f'{{"name":{text(name)},"cat":{text(cat)},"ph":"X","pid":0,"tid":{ipu},"ts":{number(ts)},'
               f'"dur":{number(dur)},"args":{{{",".join(args)}}}}}')


@existing_objects_frozen()
def write_trace(events: Union[Iterable[Event], EventRows], path: Union[str, Path], title: str = "ipuexp step") -> Path:
    """Write the trace JSON of one step to ``path`` (gzip-compressed when it ends in ``.gz``): the text
    ``json.dumps`` writes for ``{"traceEvents": trace_events(...), "displayTimeUnit": "ms", "otherData": ...}``.
    ``events``: objects, or the columns the simulation writes."""
    path = Path(path)
    events = events if isinstance(events, EventRows) else list(events)
    dump = functools.partial(json.dumps, separators=(",", ":"))

    def before(ipus: List[int]) -> str:
        return '{"traceEvents":[' + ",".join(dump(d) for d in _header(ipus, title)) + ("," if events else "")

    after = f'],"displayTimeUnit":"ms","otherData":{dump({"generator": "ipuexp", "title": title})}}}'
    text = trace_text(events, before, after)
    if text is None:  # event by event
        objects = events.events() if isinstance(events, EventRows) else events
        text = before(sorted({e.ipu for e in objects})) + ",".join(_json_events(_merged(objects))) + after
    data = text.encode()
    write_whole(path, gzip.compress(data, compresslevel=1, mtime=0) if path.suffix == ".gz" else data)
    return path


def write_trace_aside(events: Union[Iterable[Event], EventRows], path: Union[str, Path], title: str = "ipuexp step"
                      ) -> Callable[[bool], Path]:
    """Start ``write_trace`` in a forked process (``report.aside``), so the caller draws its charts on the other core
    meanwhile.

    Returns ``join(check=True)``: it waits for the child and returns the path; where the child could not write the
    file (or no fork is available), ``join`` writes it in this process, so the file is the same either way."""
    from ipuexp.report.aside import start_aside

    path = Path(path)
    events = events if isinstance(events, EventRows) else list(events)
    joined = start_aside(lambda: write_trace(events, path, title))

    def join(check: bool = True) -> Path:
        joined(check)
        return path

    return join
