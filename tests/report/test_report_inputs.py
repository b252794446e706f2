"""``python -m ipuexp.report`` on input it cannot use: one line naming the argument and the value, exit code 2,
before anything is read or written; a ``--sweep`` value goes into MLflow's search filter as a value, never as
filter syntax."""
from __future__ import annotations

import pytest

from ipuexp.commands.report import main
from ipuexp.tracking.store import quoted


def _refused(capsys, argv, *parts):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ipuexp.report: "), err
    for part in parts:
        assert part in lines[0], lines[0]


@pytest.mark.parametrize("uri", ["foo://x", "sqlite:mlflow.db", "https://"])
def test_a_uri_is_checked_as_tracking_uri_is(tmp_path, capsys, uri):
    _refused(capsys, ["bert_large", "--uri", uri, "--out", str(tmp_path / "out")], f"--uri={uri!r} is invalid")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["x' or tags.a = 'b", "abc\"def", "' OR 1=1 --", "a b"])
def test_a_sweep_value_cannot_change_the_filter(log_sweep, db_uri, tmp_path, capsys, value):
    log_sweep("s1", [(1024, 32, 1000.0, [600_000_000, 600_000_000], True)])
    _refused(capsys, ["bert_large", "--uri", db_uri, "--sweep", value, "--out", str(tmp_path / "o")],
             f"--sweep={value!r} is invalid", "all | latest")


def test_an_unknown_sweep_id_is_no_runs_not_an_error_of_the_filter(log_sweep, db_uri, tmp_path, capsys):
    log_sweep("s1", [(1024, 32, 1000.0, [600_000_000, 600_000_000], True)])
    _refused(capsys, ["bert_large", "--uri", db_uri, "--sweep", "0" * 32, "--out", str(tmp_path / "o")],
             "no FINISHED job runs")


@pytest.mark.parametrize("value", ["plain", "it's", 'say "hi"'])
def test_quoted_values_read_back_whole_in_mlflows_filter_grammar(value):
    from mlflow.utils.search_utils import SearchUtils

    parsed = SearchUtils.parse_search_filter(f"tags.k = {quoted(value)} and attributes.status = 'FINISHED'")
    assert [(c["key"], c["value"]) for c in parsed] == [("k", value), ("status", "FINISHED")]


def test_a_value_with_both_quotes_cannot_be_searched_for():
    with pytest.raises(ValueError, match="both quote characters"):
        quoted("it's \"x\"")


def test_an_out_folder_that_cannot_be_written_is_found_before_reading(db_uri, tmp_path, capsys):
    (tmp_path / "a_file").write_text("")
    _refused(capsys, ["bert_large", "--uri", db_uri, "--out", str(tmp_path / "a_file" / "o")],
             f"--out='{tmp_path / 'a_file' / 'o'}' is invalid", "not a folder")


def test_a_store_that_cannot_be_opened_is_one_line(tmp_path, capsys):
    (tmp_path / "junk.db").write_bytes(b"no database here, just some bytes")
    _refused(capsys, ["bert_large", "--uri", f"sqlite:///{tmp_path / 'junk.db'}", "--out", str(tmp_path / "o")],
             "not an SQLite database")


def test_a_store_that_does_not_exist_is_one_line_and_is_not_created(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _refused(capsys, ["bert_large", "--uri", "sqlite:///nothing.db", "--out", str(tmp_path / "o")],
             "--uri='sqlite:///nothing.db' is invalid", "no such file")
    assert not (tmp_path / "nothing.db").exists() and not (tmp_path / "o").exists()


def test_a_bad_mlflow_tracking_uri_is_named_as_the_variable(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "nosuch://store")
    _refused(capsys, ["bert_large", "--out", str(tmp_path / "o")], "MLFLOW_TRACKING_URI='nosuch://store' is invalid")
