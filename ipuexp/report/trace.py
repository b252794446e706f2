"""One step as a Chrome trace (``chrome://tracing``, https://ui.perfetto.dev): one track per IPU of a replica.

Format: the Trace Event Format's complete events (``"ph": "X"``, microsecond ``ts``/``dur``) plus ``thread_name``
metadata naming each track. A pass and the exchange that closes it are one event (the exchange share is in its
``args``), which halves the size of long steps; a path ending in ``.gz`` is written gzip-compressed (both viewers
open it as it is).
"""
from __future__ import annotations

import gzip
import json
import os
import signal
from operator import attrgetter
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Union

from ipuexp.emulator.pipeline import Event


def _merge_exchange(events: Iterable[Event]) -> List[dict]:
    """Complete events, each pass's own exchange folded into it."""
    out: List[dict] = []
    last: Dict[int, dict] = {}
    for e in sorted(events, key=attrgetter("ipu", "start_s")):
        prev = last.get(e.ipu)
        ts, dur = round(e.start_s * 1e6, 3), round(e.duration_s * 1e6, 3)
        if (prev is not None and e.category == "exchange" and e.micro_batch >= 0
                and prev["args"].get("micro_batch") == e.micro_batch and prev["args"].get("stage") == e.stage
                and -1e-3 < prev["ts"] + prev["dur"] - ts < 1e-3):
            prev["dur"] = round(prev["dur"] + dur, 3)
            prev["args"]["exchange_us"] = dur
            continue
        args: dict = {}
        if e.stage >= 0:
            args["stage"] = e.stage
        if e.micro_batch >= 0:
            args["micro_batch"] = e.micro_batch
        ev = {"name": e.name, "cat": e.category, "ph": "X", "pid": 0, "tid": e.ipu, "ts": ts, "dur": dur,
              "args": args}
        out.append(ev)
        last[e.ipu] = ev
    return out


def trace_events(events: Iterable[Event], process_name: str = "replica 0") -> List[dict]:
    events = list(events)
    ipus = sorted({e.ipu for e in events})
    out: List[dict] = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": process_name}}]
    for i in ipus:
        out.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": i, "args": {"name": f"IPU {i}"}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": i, "args": {"sort_index": i}})
    return out + _merge_exchange(events)


def write_trace(events: Iterable[Event], path: Union[str, Path], title: str = "ipuexp step") -> Path:
    """Write the trace JSON of one step to ``path`` (gzip-compressed when it ends in ``.gz``)."""
    path = Path(path)
    doc = {"traceEvents": trace_events(events, title), "displayTimeUnit": "ms",
           "otherData": {"generator": "ipuexp", "title": title}}
    data = json.dumps(doc, separators=(",", ":")).encode()
    path.write_bytes(gzip.compress(data, compresslevel=6) if path.suffix == ".gz" else data)
    return path


def write_trace_aside(events: Iterable[Event], path: Union[str, Path], title: str = "ipuexp step"
                      ) -> Callable[[bool], Path]:
    """Start ``write_trace`` in a forked process, so the caller draws its charts on the other core meanwhile.

    Returns ``join(check=True)``: it waits for the child and returns the path; where the child could not write the
    file (or no fork is available), ``join`` writes it in this process, so the file is the same either way."""
    path, events = Path(path), list(events)
    pid = 0
    if hasattr(os, "fork"):
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:  # the child: write, then leave without running the parent's exit handlers
            code = 1
            try:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(sig, signal.SIG_DFL)
                write_trace(events, path, title)
                code = 0
            finally:
                os._exit(code)

    def join(check: bool = True) -> Path:
        ok = False
        if pid > 0:
            _, status = os.waitpid(pid, 0)
            ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        if check and not ok:
            write_trace(events, path, title)
        return path

    return join
