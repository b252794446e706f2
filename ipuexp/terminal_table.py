"""Tables that fit the terminal: the one layout rule of every table ipuexp prints.

The rule
--------
**Width.** The terminal's columns when standard output is a terminal, else ``$COLUMNS`` when it is set, else 80
(:func:`terminal_width`). A caller may pass a width (the tests do); :func:`terminal_console` makes a rich console
of that width for the lines printed around a table.

**Figures are never cut or split.** A figure column (:class:`Column` with ``figure=True``, or one whose cells all
read as figures) holds numbers with their unit, sign and mark (``1,234.5``, ``12.3 MiB``, ``+4.1``, ``±15% ✓``,
``IPU 3: 512.1 MiB (92%)``): its cells keep one line, whole, right-aligned, and the column is as wide as its widest
cell. In a text cell too, a number and the unit after it (``12.3 MiB``) stay together on one line, and the column
is never narrower than such a figure. Marks and signs (✓, ✗, ±, +/-, ``*``) belong to the cell and are kept.

**Headers fold between words.** A header folds at spaces; a word wider than its column folds after ``_``, ``.`` or
``/`` where both sides keep 3 characters (``options.`` / ``replication_factor``, never ``samples/`` / ``s``); a
piece still wider makes the column wider, unless the column declares an abbreviation: then the abbreviation stands
in the header and a legend under the table spells it out. A word is never split mid-word. Room to spare goes first
to abbreviated headers, then to text columns (a folded cell costs a line per row, a folded header one line), then
to headers folded only at spaces, then to headers on one line.

**Text folds.** Text cells (names, run names, overrides) are left-aligned. They fold at spaces, then after the
separators ``/ . _ - = ,`` of a long token, and only as a last resort is a single token (a path) cut into pieces of
the column's width. A text column gives up room down to :data:`MIN_TEXT` characters (or its widest figure).

**Too wide: records.** When even the narrowest layout (figures whole, headers folded as far as the rule allows,
text columns at :data:`MIN_TEXT`) is wider than the terminal, the table becomes a list of records: for each row,
the cell of its name column as a heading line (after the column's header when it is a figure: ``IPU 3``), then one
indented ``header: value`` line per other column (empty cells left out), each line within the width.

**Alignment.** Figures right, text left, unless a column says otherwise.

Between columns there are :data:`GAP` spaces, under the headers a rule; trailing spaces are dropped. The output is
plain text; row and cell styles (rich style names) colour it on a terminal only, never in a pipe or a file.
"""
from __future__ import annotations

import os
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Iterator, List, Optional, Sequence, Tuple

DEFAULT_WIDTH = 80
"""The width when standard output is not a terminal and ``$COLUMNS`` is not set."""
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
    """A rich Console of the rule's width (:func:`terminal_width` of ``file``, default standard output)."""
    from rich.console import Console

    return Console(width=terminal_width(width, file), file=file, **kwargs)


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
    after it (``12.3 MiB`` is one token)."""
    words = text.split()
    out: List[Tuple[str, bool]] = []
    n = 0
    while n < len(words):
        word = words[n]
        if _number(word):
            while n + 1 < len(words) and _unit(words[n + 1]):
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
    width = terminal_width(width)
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


@dataclass(frozen=True)
class Column:
    """A column of a :class:`Table`."""

    header: str
    figure: Optional[bool] = None
    """Figures (right-aligned, never folded) or text (left-aligned, folds); None: figures when every cell that is
    not empty or ``-`` reads as one (:func:`is_figure`)."""
    abbreviation: Optional[str] = None
    """What the header may shrink to when a word of it is wider than the narrowest layout allows (``GA``); a legend
    under the table then spells it out."""
    align: Optional[str] = None
    """``left`` or ``right``; None: figures right, text left (a text column of figures with notes, such as
    ``16,423 (±9%) * (does not fit)``, may fold and still align right)."""


def _text(cell: Cell) -> str:
    if cell is None:
        return ""
    return str(getattr(cell, "plain", cell))


def _style(cell: Cell) -> Optional[str]:
    style = getattr(cell, "style", None) if hasattr(cell, "plain") else None
    return str(style) if style else None


Segment = Tuple[str, Optional[str]]
"""A piece of an output line and its style (None: plain)."""


@dataclass
class _Shape:
    """What the layout knows of a column."""

    header: str
    figure: bool
    abbreviation: Optional[str]
    right: bool
    """Right-aligned."""
    natural: int
    """Widest line of its cells."""
    least: int
    """Narrowest its cells allow: a figure column's widest cell, a text column's ``MIN_TEXT`` or widest figure."""

    def header_need(self, level: int) -> int:
        """Width its header needs: 0 on one line, 1 folded at spaces, 2 also after ``_ . /``, 3 abbreviated."""
        words = self.header.split() or [""]
        if level == 0:
            return cells(" ".join(words))
        need = max(cells(w) for w in words)
        if level >= 2:
            need = max(cells(p) for w in words for p in _header_pieces(w))
        if level >= 3 and self.abbreviation:
            need = min(need, cells(self.abbreviation))
        return need

    def need(self, level: int) -> int:
        return max(self.least, self.header_need(level), 1)


@dataclass
class Table:
    """Rows under headers, laid out by the module's rule. Print it with :meth:`print` (or ``rich``'s
    ``console.print``: it takes the console's width), or get the plain text with :meth:`render`."""

    columns: Sequence[Any]
    """:class:`Column` or a header (figures or text told by the cells)."""
    rows: Sequence[Sequence[Cell]] = field(default_factory=list)
    title: Optional[str] = None
    styles: Optional[Sequence[Optional[str]]] = None
    """A rich style per row (a terminal shows it; a pipe does not)."""
    name: int = 0
    """The column whose cell heads a row's record when the table turns into records."""

    def __post_init__(self) -> None:
        self.columns = [c if isinstance(c, Column) else Column(str(c)) for c in self.columns]
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"a row of {len(row)} cells under {len(self.columns)} columns")

    def add_row(self, *row: Cell, style: Optional[str] = None) -> None:
        if len(row) != len(self.columns):
            raise ValueError(f"a row of {len(row)} cells under {len(self.columns)} columns")
        styles = list(self.styles) if self.styles is not None else [None] * len(self.rows)
        self.rows = list(self.rows) + [list(row)]
        self.styles = styles + [style]

    def _shapes(self) -> List[_Shape]:
        shapes = []
        for n, col in enumerate(self.columns):
            texts = [_text(r[n]) for r in self.rows]
            figure = col.figure
            if figure is None:
                kinds = [is_figure(t) for t in texts]
                figure = any(k for k in kinds) and all(k is not False for k in kinds)
            natural = max((cells(line) for t in texts for line in t.split("\n")), default=0)
            least = natural if figure else max(min(natural, MIN_TEXT), max((widest_figure(t) for t in texts),
                                                                              default=0))
            right = figure if col.align is None else col.align == "right"
            shapes.append(_Shape(" ".join(col.header.split()), figure, col.abbreviation, right, natural, least))
        return shapes

    def widths(self, width: int) -> Optional[List[int]]:
        """The columns' widths within ``width``; None when the table must become records."""
        shapes = self._shapes()
        if not shapes:
            return []
        room = width - GAP * (len(shapes) - 1)
        level = next((lv for lv in (2, 3) if sum(s.need(lv) for s in shapes) <= room), None)
        if level is None:
            return None
        out = [s.need(level) for s in shapes]
        order = [n for n, s in enumerate(shapes) if s.figure] + [n for n, s in enumerate(shapes) if not s.figure]

        def whole(targets: List[int]) -> None:
            """Each column, cheapest first (figures first among equals), to its target when the room left allows
            it all."""
            for n in sorted(order, key=lambda n: targets[n] - out[n]):
                if out[n] < targets[n] <= out[n] + room - sum(out):
                    out[n] = targets[n]

        def even(targets: List[int], columns: List[int]) -> None:
            """The columns a character at a time, in turn, towards their targets."""
            while sum(out) < room:
                below = [n for n in columns if out[n] < targets[n]]
                if not below:
                    return
                for n in below[:room - sum(out)]:
                    out[n] += 1

        # What the room left buys, in order: the declared abbreviations' headers back, text cells on fewer lines
        # (a folded cell costs a line per row, a folded header one line), headers folded at spaces only, headers
        # on one line.
        whole([s.need(2) for s in shapes])
        even([max(s.natural, s.need(2)) for s in shapes], [n for n in order if not shapes[n].figure])
        whole([s.need(1) for s in shapes])
        whole([max(s.natural, s.need(0)) for s in shapes])
        return out

    def lines(self, width: Optional[int] = None) -> List[List[Segment]]:
        """The output lines within ``width`` (the rule's), as styled segments."""
        width = terminal_width(width)
        out: List[List[Segment]] = []
        if self.title:
            out += [[(line, None)] for line in fold(self.title, width)]
        widths = self.widths(width)
        if widths is None:
            return out + self._records(width)
        shapes = self._shapes()
        legend: List[str] = []
        heads = []
        for s, w in zip(shapes, widths):
            folded = _fold_header(s.header, w)
            if folded is None and s.abbreviation and cells(s.abbreviation) <= w:
                folded = [s.abbreviation]
                legend.append(f"{s.abbreviation}: {s.header}")
            heads.append(folded if folded is not None else fold(s.header, w))
        depth = max(len(h) for h in heads)
        heads = [[""] * (depth - len(h)) + h for h in heads]  # headers sit on the rule
        for k in range(depth):
            out.append(self._line([(h[k], None) for h in heads], shapes, widths))
        out.append([((" " * GAP).join(RULE * w for w in widths), None)])
        styles = list(self.styles or []) + [None] * len(self.rows)
        for row, style in zip(self.rows, styles):
            folded = [[_text(c)] if s.figure else fold(_text(c), w) for c, s, w in zip(row, shapes, widths)]
            for k in range(max(len(f) for f in folded)):
                parts = [(f[k] if k < len(f) else "", _style(c)) for f, c in zip(folded, row)]
                out.append(self._line(parts, shapes, widths, style))
        if legend:
            out += [[(line, None)] for line in fold("; ".join(legend), width)]
        return out

    @staticmethod
    def _line(parts: Sequence[Segment], shapes: Sequence[_Shape], widths: Sequence[int],
              style: Optional[str] = None) -> List[Segment]:
        line: List[Segment] = []
        for n, ((text, cell_style), s, w) in enumerate(zip(parts, shapes, widths)):
            pad = " " * max(w - cells(text), 0)
            if n:
                line.append((" " * GAP, style))
            if s.right:
                line += [(pad, style), (text, cell_style or style)]
            else:
                line += [(text, cell_style or style), (pad, style)]
        return _rstrip(line)

    def _records(self, width: int) -> List[List[Segment]]:
        """One block per row: the name cell as a heading, then ``header: value`` lines."""
        shapes = self._shapes()
        out: List[List[Segment]] = []
        styles = list(self.styles or []) + [None] * len(self.rows)
        for row, style in zip(self.rows, styles):
            heading = _text(row[self.name]) if 0 <= self.name < len(row) else ""
            heads = fold(heading or "-", width)
            if heading and shapes[self.name].figure:  # a number alone says little: "IPU 3", "# 7"
                named = f"{shapes[self.name].header} {heading}"
                heads = [named] if cells(named) <= width else fold(shapes[self.name].header, width) + [heading]
            out += [[(line, _style(row[self.name]) or style)] for line in heads]
            for n, (cell, s) in enumerate(zip(row, shapes)):
                value = _text(cell)
                if n == self.name or not value:
                    continue
                key = f"{INDENT}{s.header}:"
                value_style = _style(cell) or style
                if cells(key) + 1 + cells(value) <= width and "\n" not in value:
                    out.append([(key + " ", style), (value, value_style)])
                    continue
                more = " " * (cells(INDENT) + 2)
                out += [[(line, style)] for line in fold(key, width)] if cells(key) > width else [[(key, style)]]
                lines = [value] if s.figure else fold(value, width - cells(more))
                out += [[(more, style), (line, value_style)] for line in lines]
        return out

    def render(self, width: Optional[int] = None) -> str:
        """The table as plain text (no styles), lines within ``width`` (the rule's)."""
        return "\n".join("".join(text for text, _ in line) for line in self.lines(width))

    def print(self, console: Any = None, width: Optional[int] = None) -> None:
        """Print on ``console`` (default: :func:`terminal_console`); styles show on a terminal only."""
        console = console if console is not None else terminal_console(width)
        console.print(self, width=width) if width is not None else console.print(self)

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.text import Text

        for line in self.lines(options.max_width):
            text = Text(no_wrap=True, overflow="ignore", end="\n")
            for part, style in line:
                text.append(part, style=style or "")
            yield text

    def __str__(self) -> str:
        return self.render()


def _rstrip(line: List[Segment]) -> List[Segment]:
    while line and not line[-1][0].strip():
        line.pop()
    if line:
        line[-1] = (line[-1][0].rstrip(), line[-1][1])
    return line
