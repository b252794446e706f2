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

**Narrower than :data:`MIN_WIDTH` (40 columns).** The lines are laid out for a terminal of 40 columns (the
terminal's own wrapping folds them further, without cutting a figure) and every table is records.

**Too wide: records.** When even the narrowest layout (figures whole, headers folded as far as the rule allows,
text columns at :data:`MIN_TEXT`) is wider than the terminal, the table becomes a list of records: for each row,
the cell of its name column as a heading line (after the column's header when it is a figure: ``IPU 3``), then one
indented ``header: value`` line per other column (empty cells left out), each line within the width.

**Alignment.** Figures right, text left, unless a column says otherwise.

Between columns there are :data:`GAP` spaces, under the headers a rule; trailing spaces are dropped. The output is
plain text; row and cell styles (rich style names) colour it on a terminal only, never in a pipe or a file.
"""
from __future__ import annotations

from ipuexp.terminal_table.table import Column, Table
from ipuexp.terminal_table.text import (DEFAULT_WIDTH, GAP, INDENT, MARKS, MIN_PIECE, MIN_TEXT, MIN_WIDTH, RULE,
                                         UNITS, Cell, cells, fold, is_figure, terminal_console, terminal_width,
                                         widest_figure, wrap)

__all__ = ["Cell", "Column", "DEFAULT_WIDTH", "GAP", "INDENT", "MARKS", "MIN_PIECE", "MIN_TEXT", "MIN_WIDTH", "RULE",
           "Table",
           "UNITS", "cells", "fold", "is_figure", "terminal_console", "terminal_width", "widest_figure", "wrap"]
