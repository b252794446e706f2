"""How a cell, a header or a line of text folds within a width, and how wide the terminal is: the figure, header
and text parts of the rule in :mod:`ipuexp.terminal_table`."""
from __future__ import annotations

import os
import re
import sys
import unicodedata
from typing import Any, List, Optional, Tuple

DEFAULT_WIDTH = 80
"""The width when standard output is not a terminal and ``$COLUMNS`` is not set."""
MIN_WIDTH = 40
"""The narrowest layout: a terminal narrower than this gets the lines of one this wide (its own wrapping folds
them further, without cutting a figure) and every table as records. Below it, folding at the terminal's width would
cut words and figures into pieces of a few characters."""
MIN_TEXT = 12
"""A text column folds down to this many characters (fewer when its widest cell is narrower)."""
GAP = 2
"""Spaces between two columns."""
RULE = "─"
"""The character of the rule under the headers."""
INDENT = "  "
"""Indent of a record's ``header: value`` lines."""
MIN_PIECE = 3
"""A header word folds after ``_ . /`` only where both sides keep this many characters."""

_NUMBER = re.compile(r"^[(\[]?[+\-−±~≈<>]*((\d{1,3}(,\d{3})+|\d+)(\.\d+)?|\.\d+)([eE][+\-]?\d+)?"
                     r"(%|x|×|k|K|M|G|T)?(\.\.[+\-]?\d[\d,.]*(%)?)?[)\]]?[,;:]?$")
"""A number as ipuexp prints one: ``1,234.5``, ``+4.1``, ``±15%``, ``(92%)``, ``3.2e-05``, ``1.5..2.5``."""
UNITS = frozenset({"B", "KiB", "MiB", "GiB", "TiB", "kB", "MB", "GB", "TB", "%", "s", "ms", "us", "µs", "ns", "h",
                   "min", "k", "M", "G", "T", "x", "×", "samples/s", "sequences/s", "packs/s", "tokens/s", "steps/s",
                   "FLOPs", "GFLOPs", "TFLOPs", "IPUs", "tiles", "samples", "sequences"})
"""Words that, after a number, are its unit: ``12.3 MiB`` stays on one line."""
MARKS = frozenset({"✓", "✗", "*", "†", "-", "x", "×", "+/-", "±", "(does", "not", "fit)"})
"""Tokens that may stand beside the numbers of a figure cell (a mark, a sign, the planner's does-not-fit note)."""
_SEPARATORS = "/._-=,"
_HEADER_SEPARATORS = "_./"

Cell = Any
"""A cell: text, or a rich ``Text`` (its ``plain`` text and ``style``, the style shown on a terminal only)."""


def terminal_width(width: Optional[int] = None, stream: Any = None) -> int:
    """``width`` when given; else the terminal's columns when ``stream`` (default: standard output) is a terminal,
    else ``$COLUMNS`` when set, else :data:`DEFAULT_WIDTH`."""
    if width is not None:
        return int(width)
    stream = sys.stdout if stream is None else stream
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns or DEFAULT_WIDTH
    except (AttributeError, ValueError, OSError):
        pass
    columns = os.environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) > 0 else DEFAULT_WIDTH


def terminal_console(width: Optional[int] = None, file: Any = None, **kwargs: Any) -> Any:
    """A rich Console of the rule's width (:func:`terminal_width` of ``file``, default standard output), at least
    :data:`MIN_WIDTH`."""
    from rich.console import Console

    columns = terminal_width(width, file)
    console = Console(width=max(columns, MIN_WIDTH), file=_Trimmed(file), **kwargs)
    console.ipuexp_narrow = columns < MIN_WIDTH  # read by a Table printed on it: records, whatever fits in MIN_WIDTH
    return console


_TRAILING = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)(?=\n)")


class _Trimmed:
    """A stream (default: standard output, looked up at each write) whose lines lose their trailing blanks: rich
    keeps the blank a line was wrapped at, which a terminal hides and a file, a pipe or a diff does not."""

    def __init__(self, stream: Any = None) -> None:
        self._stream = stream

    @property
    def stream(self) -> Any:
        return sys.stdout if self._stream is None else self._stream

    def write(self, text: str) -> int:
        self.stream.write(_TRAILING.sub(r"\1", text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, flush, encoding: the stream's own
        return getattr(self.stream, name)


def cells(text: str) -> int:
    """Columns ``text`` takes on a terminal: wide East Asian characters count two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _take(text: str, width: int) -> Tuple[str, str]:
    """The longest head of ``text`` within ``width`` columns (at least one character), and the rest."""
    n, used = 0, 0
    while n < len(text) and (n == 0 or used + cells(text[n]) <= width):
        used += cells(text[n])
        n += 1
    return text[:n], text[n:]


def _number(token: str) -> bool:
    return bool(_NUMBER.match(token))


def _unit(token: str) -> bool:
    return token.strip("()[],;:") in UNITS


def is_figure(cell: str) -> Optional[bool]:
    """Whether a cell reads as a figure: numbers with their units, signs and marks (``12.3 MiB``, ``+4.1``,
    ``±15% ✓``). None for an empty cell or a lone ``-`` (they go with any column)."""
    tokens = cell.split()
    if not tokens or tokens == ["-"]:
        return None
    return any(_number(t) for t in tokens) and all(_number(t) or _unit(t) or t in MARKS for t in tokens)


def _tokens(text: str) -> List[Tuple[str, bool]]:
    """The words of ``text``, each with whether it is a figure that must stay whole: a number glued to the unit
    after it (``12.3 MiB`` is one token), and to a bracketed figure that qualifies it (``531.5 KiB (15%)``,
    ``16,423 (±9%)``)."""
    words = text.split()
    out: List[Tuple[str, bool]] = []
    n = 0
    while n < len(words):
        word = words[n]
        if _number(word):
            while n + 1 < len(words) and (_unit(words[n + 1]) or (words[n + 1].startswith("(")
                                                                    and words[n + 1].endswith(")")
                                                                    and _number(words[n + 1]))):
                n += 1
                word += " " + words[n]
            out.append((word, True))
        else:
            out.append((word, False))
        n += 1
    return out


def widest_figure(text: str) -> int:
    """The width of the widest figure in ``text`` (a number with its unit, or the number an override sets:
    ``2048`` of ``gradient_accumulation=2048``): what a text column must leave it."""
    widths = [cells(t) if whole else cells(t.rsplit("=", 1)[-1]) if "=" in t and _number(t.rsplit("=", 1)[-1])
              else 0 for line in text.split("\n") for t, whole in _tokens(line)]
    return max(widths, default=0)


def _pieces(token: str, separators: str) -> List[str]:
    """``token`` cut after each of its ``separators``, never inside a number (``0.5``, ``1,234``; a list such as
    ``0,1,2`` is cut after its commas)."""
    out, cur = [], ""
    for n, c in enumerate(token):
        cur += c
        if c in separators and n < len(token) - 1 and not _inside_number(token, n):
            out.append(cur)
            cur = ""
    return out + [cur] if cur else out


def _inside_number(token: str, n: int) -> bool:
    """Whether ``token[n]`` is a decimal point or a thousands separator."""
    if not (0 < n < len(token) - 1 and token[n - 1].isdigit() and token[n + 1].isdigit()):
        return False
    if token[n] != ",":
        return True
    return bool(re.match(r"\d{3}(?!\d)", token[n + 1:]))


def fold(text: str, width: int, later: Optional[int] = None) -> List[str]:
    """``text`` in lines of at most ``width`` columns (``later`` for the lines after the first): folded at spaces,
    a long token after its separators, and as a last resort cut; a figure with its unit is never broken (it may
    only overflow a column narrower than itself, which the table never makes)."""
    first, later = max(width, 1), max(later if later is not None else width, 1)
    lines: List[str] = []
    for paragraph in str(text).split("\n"):
        cur = ""
        for token, whole in _tokens(paragraph):
            width = first if not lines else later
            if cur and cells(cur) + 1 + cells(token) <= width:
                cur += " " + token
                continue
            if cur:
                lines.append(cur)
                cur = ""
            if whole or cells(token) <= width:
                cur = token
                continue
            for piece in _pieces(token, _SEPARATORS):
                width = first if not lines else later
                if cells(cur) + cells(piece) <= width:
                    cur += piece
                    continue
                if cur:
                    lines.append(cur)
                while cells(piece) > (first if not lines else later):
                    head, piece = _take(piece, first if not lines else later)
                    lines.append(head)
                cur = piece
        lines.append(cur)
    return lines


def wrap(text: str, width: Optional[int] = None, indent: int = 0, subsequent: int = 4) -> str:
    """A paragraph within ``width`` (the rule's): ``indent`` spaces before its first line and ``subsequent`` more
    before the others; figures stay whole (:func:`fold`)."""
    width = max(terminal_width(width), MIN_WIDTH)
    lines = fold(text, width - indent, width - indent - subsequent)
    return "\n".join(" " * (indent if n == 0 else indent + subsequent) + line for n, line in enumerate(lines))


def _header_pieces(word: str) -> List[str]:
    """A header word cut after its ``_ . /`` where each piece keeps :data:`MIN_PIECE` characters (``options.`` and
    ``gradient_accumulation``, never ``samples/`` and ``s``)."""
    out: List[str] = []
    for piece in _pieces(word, _HEADER_SEPARATORS):
        if out and (cells(out[-1]) < MIN_PIECE or cells(piece) < MIN_PIECE):
            out[-1] += piece
        else:
            out.append(piece)
    return out


def _fold_header(header: str, width: int) -> Optional[List[str]]:
    """``header`` folded at spaces, and a word wider than ``width`` after ``_ . /``; None when a piece is still
    wider (a word is never split)."""
    lines: List[str] = []
    cur = ""
    for word in header.split():
        pieces = [word] if cells(word) <= width else _header_pieces(word)
        if any(cells(p) > width for p in pieces):
            return None
        for n, piece in enumerate(pieces):
            sep = " " if n == 0 and cur else ""
            if cells(cur) + cells(sep) + cells(piece) <= width:
                cur += sep + piece
            else:
                lines.append(cur)
                cur = piece
    return lines + [cur]
