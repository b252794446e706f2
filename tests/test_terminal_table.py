"""The one rule of tables that fit the terminal (ipuexp.terminal_table), at 60, 80, 100 and 120 columns, to a pipe
and to a terminal."""
from __future__ import annotations

import io
import os
import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipuexp import terminal_table as tt
from ipuexp.terminal_table import Column, Table, fold, is_figure, terminal_width, wrap

WIDTHS = (60, 80, 100, 120)
RULE = tt.RULE
ANSI = re.compile(r"\x1b\[[0-9;]*m")

VALIDATE_ROWS = [
    ["bert-large-pod16-packed *", "12,345", "11,000", "+12.2", "-3.4", "+5.0", "-", "±15% ✓"],
    ["gpt2-medium-pod64-sequence-length-1024", "1,234", "1,200", "+2.8", "+1.1", "-0.4", "+9.9", "±8% ✗"],
    ["resnet50-pod4", "180,125", "157,002", "+14.7", "+157.3", "-12.0", "+0.1", "±157% ✓"],
]
VALIDATE_HEADERS = ["row", "pred", "publ", "error", "LOO", "LOFO", "LOSO", "band"]

SWEEP_HEADERS = ["run", "gradient accumulation", "options.replication_factor", "micro batch size", "fits",
                 "samples/s", "peak IPU memory", "overrides"]
SWEEP_ROWS = [
    ["bert-1", "2048", "4", "16", "yes", "3,531.6 (+-12%)", "512.1 MiB",
     "model.hf.ipu_config=/very/long/path/to/some/ipu_config/file.json options.amp=0.2"],
    ["bert-2", "16", "16", "1", "no", "13,211.0 (+-8%)", "1,023.9 MiB", "options.gradient_accumulation=16"],
]


def figure_cells(headers, rows):
    table = Table(headers, rows)
    shapes = table._shapes()
    return [r[n] for r in rows for n, s in enumerate(shapes) if s.figure and r[n] not in ("", "-")]


def check(text: str, width: int, figures, headers) -> None:
    lines = text.split("\n")
    too_long = [line for line in lines if tt.cells(line) > width]
    assert not too_long, f"lines over {width}: {too_long}"
    for figure in figures:
        assert any(figure in line for line in lines), f"{figure!r} cut or split:\n{text}"
    words = {w for line in lines for w in re.split(r"[\s:]+", line) if w}
    records = RULE not in text  # a record's heading is its name cell: the name column's header is not shown
    for header in headers[1:] if records else headers:
        for word in header.split():
            pieces = [word] if word in words else [p for p in re.split(r"(?<=[_./])", word) if p]
            assert all(any(p in line for line in lines) for p in pieces), f"header word {word!r} split:\n{text}"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("headers,rows", [(VALIDATE_HEADERS, VALIDATE_ROWS), (SWEEP_HEADERS, SWEEP_ROWS)])
def test_a_pipe_gets_lines_within_the_width_and_whole_figures(width, headers, rows, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", str(width))
    Table(headers, rows, title="A title long enough to fold on the narrowest of the terminals").print()
    out = capsys.readouterr().out
    assert not ANSI.search(out)  # plain text in a pipe
    check(out.rstrip("\n"), width, figure_cells(headers, rows), headers)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_terminal_gets_its_own_width_and_styles_that_fit(width, monkeypatch):
    """Standard output a terminal: its columns rule, not $COLUMNS; styles colour the cells without widening."""
    class Tty(io.StringIO):
        def isatty(self):
            return True

        def fileno(self):
            return 1

    out = Tty()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((width, 24)))
    monkeypatch.setenv("COLUMNS", "33")
    assert terminal_width() == width
    from rich.console import Console

    rows = [list(r) for r in VALIDATE_ROWS]
    console = Console(file=out, width=terminal_width(), force_terminal=True, color_system="standard")
    Table(VALIDATE_HEADERS, rows, styles=["bold green", None, "red"]).print(console)
    text = out.getvalue()
    assert ANSI.search(text)
    check(ANSI.sub("", text).rstrip("\n"), width, figure_cells(VALIDATE_HEADERS, rows), VALIDATE_HEADERS)


def test_the_width_is_the_terminal_then_columns_then_80(monkeypatch):
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.delenv("COLUMNS", raising=False)
    assert terminal_width() == 80
    monkeypatch.setenv("COLUMNS", "100")
    assert terminal_width() == 100
    assert terminal_width(60) == 60


def test_figures_are_right_aligned_text_left_and_the_widest_is_not_padded():
    text = Table(["name", "samples/s"], [["a", "1.0"], ["longer name", "1,234.5"]]).render(80)
    assert text.split("\n") == ["name         samples/s",
                                "───────────  ─────────",
                                "a                  1.0",
                                "longer name    1,234.5"]


def test_a_header_folds_between_words_and_after_separators_never_mid_word():
    rows = [["1", "2", "3"]]
    text = Table(["gradient accumulation", "options.device_iterations", "x"], rows).render(40)
    assert "accumulation" in text and "gradient" in text
    assert "options." in text and "device_" in text and "iterations" in text
    assert "accumulat\n" not in text and "devic\n" not in text


def test_a_declared_abbreviation_stands_in_for_a_header_too_wide_and_the_legend_spells_it_out():
    columns = [Column(f"extraordinarily{n}") for n in range(3)]
    columns.append(Column("gradientaccumulationsteps", abbreviation="GA"))
    text = Table(columns, [["1", "2", "3", "2048"]]).render(62)
    assert all(len(line) <= 62 for line in text.split("\n"))
    assert "GA: gradientaccumulationsteps" in text and "2048" in text


def test_a_header_word_wider_than_its_values_widens_the_column():
    text = Table(["#", "accumulationsteps"], [["1", "2"]]).render(40)
    assert "accumulationsteps" in text


def test_a_number_and_its_unit_stay_on_one_line_in_text():
    # The bracketed share that qualifies a figure stays with it: 531.5 KiB (15%) is one figure.
    assert fold("fullest IPU 3: 512.1 MiB (92%) of 897.0 MiB", 16) == \
        ["fullest IPU 3:", "512.1 MiB (92%)", "of 897.0 MiB"]
    assert fold("fullest IPU 3: 512.1 MiB (92%) of 897.0 MiB", 12) == \
        ["fullest IPU", "3:", "512.1 MiB (92%)", "of 897.0 MiB"]
    assert fold("a/very/long/path/to/a/file.yaml", 10) == ["a/very/", "long/path/", "to/a/file.", "yaml"]
    assert fold("abcdefghijklmnopqrstuvwxyz", 10) == ["abcdefghij", "klmnopqrst", "uvwxyz"]
    assert fold("lr 0.0001234", 6) == ["lr", "0.0001234"]  # a figure wider than the width stays whole


def test_a_text_column_is_never_narrower_than_a_figure_in_it():
    rows = [["name", "IPU 3: 1,234,567.1 MiB (92%)"]]
    text = Table([Column("a"), Column("where", figure=False)], rows).render(40)
    assert "1,234,567.1 MiB" in text


def test_marks_and_signs_are_kept():
    text = Table(VALIDATE_HEADERS, VALIDATE_ROWS).render(80)
    for mark in ("±15% ✓", "±8% ✗", "±157% ✓", "+157.3", "-12.0", "*"):
        assert mark in text


def test_is_figure():
    for cell in ("1,234.5", "12.3 MiB", "+4.1", "±15% ✓", "3,531.6 (+-12%)", "(92%)", "4 x 2", "1.5..2.5",
                 "12,345 (±5%) *"):
        assert is_figure(cell), cell
    for cell in ("yes", "bert-large", "options.amp=0.2", "IPU 3: 12 MiB"):
        assert not is_figure(cell), cell
    assert is_figure("-") is None and is_figure("") is None


def test_a_twelve_column_table_at_60_turns_into_records():
    headers = ["name"] + [f"metric {n}" for n in range(1, 12)]
    rows = [[f"configuration-{r}"] + [f"{1000 * r + n:,}.5 MiB" for n in range(11)] for r in range(3)]
    text = Table(headers, rows).render(60)
    lines = text.split("\n")
    assert lines[0] == "configuration-0"
    assert lines[1] == "  metric 1: 0.5 MiB"
    assert "configuration-2" in lines and "  metric 11: 2,010.5 MiB" in lines
    check(text, 60, [c for r in rows for c in r[1:]], headers)
    assert "─" not in text  # no table rule: records


def test_records_put_a_long_value_under_its_key():
    rows = [["run"] + ["1.0"] * 10 + ["a/b/" * 30]]
    text = Table(["run"] + [f"column {n}" for n in range(10)] + ["overrides"], rows).render(40)
    assert "  overrides:" in text.split("\n")
    assert all(len(line) <= 40 for line in text.split("\n"))


def test_the_rich_console_prints_it_at_its_width():
    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=60).print(Table(SWEEP_HEADERS, SWEEP_ROWS))
    assert all(len(line) <= 60 for line in out.getvalue().split("\n"))
    assert not ANSI.search(out.getvalue())


def test_wrap_keeps_figures_and_indents():
    text = wrap("Throughput: 1,234.5 samples/s at 512.1 MiB of " * 4, 40, indent=2)
    lines = text.split("\n")
    assert lines[0].startswith("  T") and all(line.startswith("      ") for line in lines[1:])
    assert all(len(line) <= 40 for line in lines)
    assert "1,234.5 samples/s" in text.replace("\n      ", "\n")


def test_rows_must_match_the_columns():
    with pytest.raises(ValueError):
        Table(["a", "b"], [["1"]])


# Random tables: figures (numbers with a sign, a unit, a mark) and text (words, paths, overrides).
_number = st.builds(lambda x, d: f"{x:,.{d}f}", st.floats(-1e7, 1e7, allow_nan=False), st.integers(0, 2))
_figure = st.builds(lambda sign, n, unit, mark: f"{sign}{n.lstrip('-')}{unit}{mark}",
                    st.sampled_from(["", "+", "-", "±"]), _number,
                    st.sampled_from(["", "%", " MiB", " GiB", " samples/s", " ms"]),
                    st.sampled_from(["", " ✓", " ✗", " *"]))
_word = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=15)
_token = st.one_of(_word, st.builds("/".join, st.lists(_word, min_size=2, max_size=6)),
                   st.builds(lambda k, v: f"{k}={v}", _word, _word), _number)
_text = st.builds(" ".join, st.lists(_token, min_size=1, max_size=6))
_header = st.builds(" ".join, st.lists(st.one_of(_word, st.builds("_".join, st.lists(_word, min_size=2,
                                                                                      max_size=3))),
                                         min_size=1, max_size=3))


@st.composite
def tables(draw):
    kinds = draw(st.lists(st.booleans(), min_size=1, max_size=12))
    headers = [draw(_header) for _ in kinds]
    rows = [[draw(_figure) if figure else draw(_text) for figure in kinds]
            for _ in range(draw(st.integers(0, 5)))]
    columns = [Column(h, figure=figure) for h, figure in zip(headers, kinds)]
    figures = [r[n] for r in rows for n, figure in enumerate(kinds) if figure]
    return columns, rows, figures


@settings(max_examples=300, deadline=None)
@given(tables(), st.integers(40, 160), st.one_of(st.none(), _text))
def test_any_table_fits_any_width_from_40_with_its_figures_whole(table, width, title):
    columns, rows, figures = table
    text = Table(columns, rows, title=title).render(width)
    check(text, width, figures, [c.header for c in columns] if rows else [])


def test_below_the_minimum_width_tables_are_records_and_no_figure_is_cut(capsys):
    """A terminal of 5 columns: the lines of one of MIN_WIDTH, the table as records, every figure whole."""
    from ipuexp.terminal_table import MIN_WIDTH, terminal_console, wrap

    table = Table(["model", "parameters", "throughput"], [["bert_base", "71.71 M", "11,397.4 samples/s"]])
    for text in (table.render(5), table.render(1)):
        assert text.splitlines() == ["bert_base", "  parameters: 71.71 M", "  throughput: 11,397.4 samples/s"]
    assert all(len(line) <= MIN_WIDTH for line in wrap("Ran: micro-batch 32, sequence length 128", 5).splitlines())
    assert "micro-batch" in wrap("Ran: micro-batch 32, sequence length 128", 5)
    console = terminal_console(5)
    assert console.width == MIN_WIDTH
    console.print(Table(["a", "b"], [["x", "1.5"]]))  # fits in MIN_WIDTH, and is records all the same
    assert capsys.readouterr().out.splitlines() == ["x", "  b: 1.5"]


def test_a_run_report_at_five_columns_keeps_its_figures(tmp_path):
    import os
    import subprocess
    import sys

    from tests.test_cli import ROOT

    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="5")
    proc = subprocess.run([sys.executable, "-m", "ipuexp", "+recipe=bert_base", "tracking.enabled=false",
                           "report.charts=never", "hydra.run.dir=run"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert "  parameters: 25.05 M" in lines and "  total: 476.3 MiB" in lines, proc.stdout[:3000]
    assert lines[0].startswith("Ran: micro-batch 32,") and max(len(line) for line in lines[:20]) <= 40
