"""Console tables of the calibration commands: a name column and figures, within the terminal's width."""
from __future__ import annotations

from typing import Any, Sequence


def fitted_table(console: Any, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]],
                 min_name: int = 14) -> None:
    """Print a table whose figures keep their natural width and whose first column (names) gets what is left, at
    least ``min_name``, folding within it. No vertical rules and short headers: ten columns fit 80 terminal
    columns."""
    from rich import box
    from rich.table import Table

    def build(width: int) -> Any:
        table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, title_justify="left")
        table.add_column(headers[0], overflow="fold", width=width)
        for h in headers[1:]:
            table.add_column(h, justify="right", no_wrap=True)
        for r in rows:
            table.add_row(*r)
        return table

    width = max(len(headers[0]), *(len(r[0]) for r in rows))
    table = build(width)
    wide = console.options.update(width=10_000)  # measured unclamped: the table's own width
    while width > min_name and console.measure(table, options=wide).maximum > console.width:
        width -= 1
        table = build(width)
    console.print(table)
