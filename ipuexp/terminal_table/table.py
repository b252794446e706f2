"""The :class:`Table` of :mod:`ipuexp.terminal_table`: columns laid out by the rule, or records when too wide."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, List, Optional, Sequence, Tuple

from ipuexp.terminal_table.text import (GAP, INDENT, MIN_TEXT, MIN_WIDTH, RULE, Cell, _fold_header, _header_pieces,
                                         cells, fold, is_figure, terminal_console, terminal_width, widest_figure)


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

    def lines(self, width: Optional[int] = None, records: bool = False) -> List[List[Segment]]:
        """The output lines within ``width`` (the rule's), as styled segments; as records when ``records`` or when
        ``width`` is below :data:`MIN_WIDTH` (then within that)."""
        width = terminal_width(width)
        narrow = records or width < MIN_WIDTH
        width = max(width, MIN_WIDTH)
        out: List[List[Segment]] = []
        if self.title:
            out += [[(line, None)] for line in fold(self.title, width)]
        widths = None if narrow else self.widths(width)
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

        for line in self.lines(options.max_width, records=getattr(console, "ipuexp_narrow", False)):
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
