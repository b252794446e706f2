"""The trace's complete events as JSON text, built over numpy columns rather than event by event.

A long step has hundreds of thousands of events; formatting each in Python is most of the time the trace takes. Here
the sort, the merge of each pass with its exchange and the ``round(x, 3)`` of every time run over arrays, and the
text is one ``str.join`` of a few pieces per event, each taken from a small table. The text is exactly what
``trace._json_events`` writes for ``trace._merged``: where an event falls outside what is done here exactly (a NaN
start, an exchange that would merge into a pass already merged, an enormous stage or micro-batch), ``trace_text``
returns None and the caller formats event by event.
"""
from __future__ import annotations

from json.encoder import encode_basestring_ascii
from typing import Callable, List, Optional, Tuple, Union

import numpy as np

from ipuexp.emulator.events import EventRows
from ipuexp.report.event_columns import Columns

_LARGEST = 1e14
"""Above this many thousandths ``round`` is left to Python (``_round3``'s test needs the float's rounding error well
under a half)."""


def _round3(x: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``round(v, 3)`` of each float: the rounded floats, their whole thousandths, and where those are exact.

    Python rounds the exact binary value half to even; ``x * 1000`` is off from it by at most half an ulp, so its
    nearest integer is the same wherever it is further than that from a half. The rest (and negative, huge or
    non-finite values, whose text is left to ``repr``) go through ``round`` itself."""
    with np.errstate(invalid="ignore"):  # inf and NaN: not exact
        y = x * 1000.0
        whole = np.floor(y)
        frac = y - whole
        exact = (x >= 0) & ~np.signbit(x) & (y < _LARGEST) & (np.abs(frac - 0.5) > 1e-15 * y)
    k = np.where(exact, whole + (frac > 0.5), 0.0).astype(np.int64)
    r = k / 1000.0  # the float nearest k/1000: what ``round`` returns (both are correctly rounded)
    for i in np.flatnonzero(~exact).tolist():
        r[i] = round(float(x[i]), 3)
    return r, k, exact


def _fractions(suffix: str) -> np.ndarray:
    """The end of ``float.__repr__`` of a float with at most three decimals (".0", ".001", ..., ".1") for each
    number of thousandths, then ``suffix``; the last entry: ``suffix`` alone."""
    return np.array(["." + (f"{f:03d}".rstrip("0") or "0") + suffix for f in range(1000)] + [suffix], dtype=object)


def _rests() -> np.ndarray:
    """The text of 0-999 alone, then after thousands (three digits); the last entry: none."""
    return np.array(list(map(str, range(1000))) + [f"{i:03d}" for i in range(1000)] + [""], dtype=object)


def _distinct(key: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_inverse=True)``, by a dense table where the keys span a short range."""
    lo, hi = int(key.min()), int(key.max())
    if hi - lo > 4 * len(key) + 1000:
        return np.unique(key, return_inverse=True)
    present = np.zeros(hi - lo + 1, dtype=bool)
    present[key - lo] = True
    return np.flatnonzero(present) + lo, (np.cumsum(present) - 1)[key - lo]


def _sorted_order(ipu: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The order of ``sorted(key=attrgetter("ipu", "start_s"))`` (stable). Where the events come in time order on
    each IPU (as a step's do), a stable sort by IPU alone (a radix sort of small integers) gives it."""
    low, high = int(ipu.min()), int(ipu.max())
    small = ipu.astype(np.int16) if -2 ** 15 <= low and high < 2 ** 15 else ipu
    order = np.argsort(small, kind="stable")
    s, i = start[order], small[order]
    if ((s[1:] >= s[:-1]) | (i[1:] != i[:-1])).all():
        return order
    order = np.argsort(start, kind="stable")
    return order[np.argsort(small[order], kind="stable")]


def trace_text(events: Union[list, EventRows], before: Callable[[List[int]], str], after: str) -> Optional[str]:
    """``before(the IPUs, sorted)``, the comma-separated JSON of the merged complete events, then ``after``; None
    where not exact."""
    n = len(events)
    if n == 0:
        return before([]) + after
    try:
        c = Columns(events)
    except (TypeError, ValueError, OverflowError):  # not the numbers an Event holds
        return None
    kinds, cat, ipu, start, dur, stage, mb = c.kinds, c.cat, c.ipu, c.start, c.dur, c.stage, c.mb
    if np.isnan(start).any() or max(int(stage.max()), int(mb.max())) > 4 * n + 1000:
        return None
    order = _sorted_order(ipu, start)
    ipu, start, dur, stage, mb, cat = ipu[order], start[order], dur[order], stage[order], mb[order], cat[order]
    ts, ts_k, ts_exact = _round3(start * 1e6)
    du = _round3(dur * 1e6)[0]

    # An exchange joins the event before it on its IPU: same micro-batch and stage, and it starts where that ends.
    cand = (mb >= 0) & c.of_kind("exchange")[order]
    same = ipu[1:] == ipu[:-1]
    gap = (ts[:-1] + du[:-1]) - ts[1:]
    merged = np.zeros(n, dtype=bool)
    merged[1:] = cand[1:] & same & (mb[1:] == mb[:-1]) & (stage[1:] == stage[:-1]) & (-1e-3 < gap) & (gap < 1e-3)
    if (merged[:-1] & cand[1:] & same).any():  # it would be compared with the pass it merged into
        return None
    into = np.flatnonzero(merged) - 1
    exchange = du[into + 1]
    du[into] = _round3(du[into] + exchange)[0]
    rows = np.flatnonzero(~merged)
    x_of = np.append(merged[1:], False)[rows]  # the kept events an exchange merged into
    ipu, cat, stage, mb, du = ipu[rows], cat[rows], stage[rows], mb[rows], du[rows]
    ts, ts_k, ts_exact = ts[rows], ts_k[rows], ts_exact[rows]
    m = len(rows)

    name_col = c.names(order[rows])
    joined = "".join(name_col)
    quote = '"' if joined.isascii() and joined.isprintable() and '"' not in joined and "\\" not in joined else ""
    if not quote:  # escaped as json.dumps does, quotes and all
        name_col = list(map(encode_basestring_ascii, name_col))

    # The start: category and IPU from a table; the whole microseconds as thousands and the rest (two lookups cost
    # less than str() of each number); the fraction from a table.
    ipus, ipu_code = _distinct(ipu)
    firsts = np.array([f'{quote},"cat":{encode_basestring_ascii(k)},"ph":"X","pid":0,"tid":{i},"ts":'
                       for k in kinds for i in ipus.tolist()], dtype=object)[cat * len(ipus) + ipu_code].tolist()
    whole = ts_k // 1000
    thousands = whole // 1000
    heads = np.array([""] + list(map(str, range(1, int(thousands.max()) + 1))), dtype=object)[thousands].tolist()
    for i in np.flatnonzero(~ts_exact).tolist():
        heads[i] = repr(float(ts[i]))
    mids = _rests()[np.where(ts_exact, whole % 1000 + 1000 * (thousands > 0), 2000)].tolist()
    ends = _fractions(',"dur":')[np.where(ts_exact, ts_k % 1000, 1000)].tolist()

    # The args: the duration and stage once per distinct pair, the micro-batch's number from a table, and the
    # exchange once per distinct value, with the closing braces and the next event's opening.
    s_code = np.maximum(stage + 1, 0)
    spans = int(s_code.max()) + 1
    d_vals, d_code = _distinct(du.view(np.int64))
    keys, key_code = _distinct((d_code * spans + s_code) * 2 + (mb >= 0))
    args = []
    for key in keys.tolist():
        d, sb = divmod(key, 2 * spans)
        st, b = divmod(sb, 2)
        text = f'"stage":{st - 1}' if st else ""
        text += ("," if text else "") + '"micro_batch":' if b else ""
        args.append(f'{float(d_vals[d].view(np.float64))!r},"args":{{{text}')
    numbers = np.array([""] + list(map(str, range(int(mb.max()) + 1))), dtype=object)
    opening = '}},{"name":' + quote
    x_texts, x_index = [opening], np.zeros(m, dtype=np.int64)
    if len(exchange):
        x_vals, x_code = _distinct(exchange.view(np.int64))
        x_texts += [f',"exchange_us":{v!r}{opening}' for v in x_vals.view(np.float64).tolist()]
        x_index[x_of] = x_code + 1
    tails = np.array(x_texts, dtype=object)[x_index].tolist()
    tails[-1] = tails[-1][:-len(opening)] + "}}" + after

    pieces = 8
    out: List[str] = [""] * (pieces * m + 1)
    out[0] = before(ipus.tolist()) + '{"name":' + quote
    out[1::pieces] = name_col
    out[2::pieces] = firsts
    out[3::pieces] = heads
    out[4::pieces] = mids
    out[5::pieces] = ends
    out[6::pieces] = np.array(args, dtype=object)[key_code].tolist()
    out[7::pieces] = numbers[np.maximum(mb + 1, 0)].tolist()
    out[8::pieces] = tails
    return "".join(out)
