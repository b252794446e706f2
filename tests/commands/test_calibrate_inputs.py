"""``python -m ipuexp.calibrate`` on input it cannot use: one line naming the file or argument, the value and what
is allowed, exit code 2, found before any fit, and nothing written."""
from __future__ import annotations

import csv

import pytest

from ipuexp.calibration import user
from ipuexp.commands import calibrate as cmd
from ipuexp.fitting.measured_runs import MeasurementError, read_csv


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(user.ENV, str(tmp_path / "cals"))
    return tmp_path


def _refused(capsys, argv, *parts):
    code = cmd.main(argv)
    err = capsys.readouterr().err
    assert code == cmd.EXIT_BAD_INPUT, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ipuexp.calibrate: "), err
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def test_a_csv_field_over_the_csv_modules_limit_is_one_line(here, capsys):
    path = here / "big.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([["id", "overrides", "measured_samples_per_s"], ["a", "x" * (csv.field_size_limit()
                                                                                          + 1), "10"]])
    _refused(capsys, [str(path), "--name", "n"], str(path), "field larger than field limit", "UTF-8 CSV")
    assert not (here / "cals").exists()


def test_a_file_that_is_not_utf8_names_the_file_and_the_encoding(here, capsys):
    path = here / "latin1.csv"
    path.write_bytes("id,overrides,measured_samples_per_s\nmesuré,+recipe=bert_base,10\n".encode("latin-1"))
    _refused(capsys, [str(path), "--name", "n"], str(path), "not UTF-8", "encoded as UTF-8")
    with pytest.raises(MeasurementError):
        read_csv(path)


def test_a_utf8_file_with_a_byte_order_mark_is_read(here):
    path = here / "bom.csv"
    path.write_bytes("id,overrides,measured_samples_per_s\nr1,+recipe=bert_base,10\n".encode("utf-8-sig"))
    assert [m.id for m in read_csv(path)] == ["r1"]


@pytest.mark.parametrize("uri", ["foo://host/x", "sqlite:mlflow.db", "http://"])
def test_a_uri_is_checked_as_tracking_uri_is(here, capsys, uri):
    _refused(capsys, ["--name", "n", "--from-mlflow", "E", "--uri", uri], f"--uri={uri!r} is invalid", "allowed:")


def test_a_store_that_cannot_be_opened_is_one_line(here, capsys):
    (here / "junk.db").write_bytes(b"this is not an sqlite database file")
    _refused(capsys, ["--name", "n", "--from-mlflow", "E", "--uri", "sqlite:///junk.db"],
             "--uri='sqlite:///junk.db' is invalid", "not an SQLite database")


def test_a_calibration_folder_that_cannot_be_written_is_found_before_the_fit(here, capsys, monkeypatch):
    (here / "a_file").write_text("")
    monkeypatch.setenv(user.ENV, str(here / "a_file" / "cals"))
    path = here / "m.csv"
    path.write_text("id,overrides,measured_samples_per_s\nr1,+recipe=bert_base,10\n")
    _refused(capsys, [str(path), "--name", "n"], f"{user.ENV}=", "a folder that can be written", "not a folder")


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_a_folder_in_the_place_of_the_calibration_file_is_found_before_the_fit(here, capsys, monkeypatch,
                                                                               overwrite):
    (here / "cals" / "n.yaml").mkdir(parents=True)
    monkeypatch.setattr(cmd, "_calibrate", lambda *a: pytest.fail("the fit started"))
    path = here / "m.csv"
    path.write_text("id,overrides,measured_samples_per_s\nr1,+recipe=bert_base,10\n")
    _refused(capsys, [str(path), "--name", "n", *overwrite], "--name='n' is invalid", "is not a file",
             "allowed: a name whose NAME.yaml is a file, or absent")
    assert list((here / "cals" / "n.yaml").iterdir()) == []


def test_a_store_that_does_not_exist_is_one_line_and_is_not_created(here, capsys):
    _refused(capsys, ["--name", "n", "--from-mlflow", "E", "--uri", "sqlite:///none.db"],
             "--uri='sqlite:///none.db' is invalid", "no such file")
    assert not (here / "none.db").exists()


@pytest.mark.slow
def test_a_name_taken_during_the_fit_is_neither_replaced_nor_lost(here, capsys, monkeypatch):
    """Another ``calibrate --name n`` finishes while this one fits: its file stays, and this fit is kept beside it
    under a free name that the one line gives."""
    from ipuexp.calibration import load_rows
    from ipuexp.fitting import refit as fit_module

    rows = {r.id: r.published for r in load_rows()}
    vit, gpt2 = "vit_b16_finetune_bow_pod16_pytorch", "gpt2_medium_wikitext103_sl1024_mk2_pod16_optimum"
    path = here / "m.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([["id", "overrides", "measured_samples_per_s"],
                                 ["vit", f"+calibration_run={vit}", rows[vit]],
                                 ["gpt2", f"+calibration_run={gpt2}", rows[gpt2]]])
    other = here / "cals" / "n.yaml"
    real_refit = fit_module.refit

    def refit_while_another_writes(*args, **kwargs):
        out = real_refit(*args, **kwargs)
        other.parent.mkdir(parents=True, exist_ok=True)
        other.write_text("# the other process's calibration\n")
        return out

    monkeypatch.setattr(fit_module, "refit", refit_while_another_writes)
    code = cmd.main([str(path), "--name", "n", "--measured-only"])
    err = capsys.readouterr().err.strip()
    assert code == cmd.EXIT_BAD_INPUT and len(err.splitlines()) == 1, err
    assert "--name='n' is invalid" in err and "--overwrite" in err and "calibration=n-2" in err
    assert other.read_text() == "# the other process's calibration\n"  # not replaced
    assert user.load("n-2").rows[0].id == "vit"  # not lost
    assert sorted(p.name for p in other.parent.iterdir()) == ["n-2.yaml", "n.yaml"]  # no temporary file


def test_an_empty_experiment_name_is_one_line(here, capsys):
    _refused(capsys, ["--name", "n", "--from-mlflow", ""], "--from-mlflow='' is invalid")
