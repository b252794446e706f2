"""``python -m ipuexp.calibrate`` on two published runs the shipped constants were not fitted to (the ViT-B/16 and
GPT-2 rows, which ``validate.yaml`` keeps out of the fit): no error grows and the ViT run's falls, the run no shared
constant explains (GPT-2) is named, every shipped row's leave-one-out error is printed, the file round-trips, and
``calibration=NAME`` changes a run's prediction and is logged with it."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ipuexp.calibration import load_rows, user
from ipuexp.commands import calibrate as cmd
from ipuexp.fitting.measured_runs import OUTLIER_FACTOR, Measurement, MeasurementError, prepare, read_csv

ROOT = Path(__file__).resolve().parents[2]
VIT = "vit_b16_finetune_bow_pod16_pytorch"
GPT2 = "gpt2_medium_wikitext103_sl1024_mk2_pod16_optimum"
PUBLISHED = {r.id: r.published for r in load_rows()}


def _csv(path: Path, rows) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "overrides", "measured_samples_per_s"])
        w.writerows(rows)
    return path


def _two_published(tmp_path: Path) -> Path:
    return _csv(tmp_path / "measured.csv", [("vit", f"+calibration_run={VIT}", PUBLISHED[VIT]),
                                            ("gpt2", f"+calibration_run={GPT2}", PUBLISHED[GPT2])])


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """The calibration on the two rows, refitted with the shipped rows; its directory and what it printed."""
    tmp = tmp_path_factory.mktemp("calibrate")
    mp = pytest.MonkeyPatch()
    mp.setenv(user.ENV, str(tmp / "cals"))
    mp.setenv("COLUMNS", "80")
    mp.chdir(tmp)
    try:
        from io import StringIO
        from contextlib import redirect_stdout

        out = StringIO()
        with redirect_stdout(out):
            code = cmd.main([str(_two_published(tmp)), "--name", "pub2", "--recipe", "vit_b16"])
        yield tmp, code, out.getvalue()
    finally:
        mp.undo()


@pytest.mark.slow
def test_the_measured_rows_errors_fall(calibrated):
    tmp, code, out = calibrated
    assert code == 0, out
    cal = user.load("pub2", tmp / "cals")
    assert cal.fitted_on == "shipped+measured"
    assert [r.id for r in cal.rows] == ["vit", "gpt2"]
    errors = {}
    for r in cal.rows:
        before = abs(r.before_samples_per_s / r.measured_samples_per_s - 1)
        after = abs(r.after_samples_per_s / r.measured_samples_per_s - 1)
        assert after <= before + 1e-6, r
        assert r.loo_samples_per_s is not None
        errors[r.id] = (before, after)
    # ViT's run falls within a few percent: the host's feed of its replicas, which no shipped row binds, takes it
    # (its leave-one-out prediction, without the run, is as far off as before). GPT-2's stays: no shared constant
    # moves its 1,024-token layers.
    assert errors["vit"][1] < 0.05 < 0.3 < errors["vit"][0]
    assert errors["gpt2"][1] > 0.2
    vit = cal.rows[0]
    assert vit.loo_samples_per_s / vit.measured_samples_per_s - 1 > 0.3
    # The shipped constants were not fitted to these rows: before the refit they are as far off as validate says.
    assert vit.before_samples_per_s / PUBLISHED[VIT] == pytest.approx(1.388, abs=0.05)
    assert cal.constants != cal.replaced


@pytest.mark.slow
def test_it_prints_every_rows_leave_one_out_error_the_shifts_and_the_bands(calibrated):
    _, _, out = calibrated
    assert max(len(line) for line in out.splitlines()) <= 80
    for row in load_rows():  # every shipped row is listed (its id may fold), with its figures
        assert row.id[:12] in out
    assert "Fitted constants" in out and "LOO range" in out
    for name in ("amp_efficiency", "vector_efficiency", "compute_set_cycles", "host_step_s"):
        assert name in out
    assert "Error band of the measured configurations, shipped -> new: vit" in out
    # GPT-2 stays off: said, not hidden (the refit takes ViT's run within a few percent)
    assert "gpt: the measured runs stay +" in out
    # ViT's comes close only through itself (its leave-one-out prediction stays far off): said too.
    folded = " ".join(out.split())
    assert "vit: the measured runs come within" in folded and "only through themselves" in folded
    assert "learns no per-model factor" in " ".join(out.split()).replace("- ", "-")
    assert "Recipes: predicted samples/s before and after" in out
    assert "Wrote calibration/pub2.yaml" not in out  # $IPUEXP_CALIBRATION_DIR: the path is where it went
    assert "calibration=pub2" in out


@pytest.mark.slow
def test_the_residuals_give_the_new_bands(calibrated):
    tmp, _, _ = calibrated
    cal = user.load("pub2", tmp / "cals")
    ids = {r.id for r in cal.residuals}
    assert {"vit", "gpt2"} | {r.id for r in load_rows()} == ids
    shipped_gpt2 = next(r for r in cal.residuals if r.id == GPT2)
    assert shipped_gpt2.loo_error_pct > 20  # not fitted: its error under the refitted constants
    # GPT-2 stays far off after the refit: its measured row is unexplained too, ViT's (within 20%) is explained,
    # so a GPT configuration's band covers at least twice that error as a factor.
    by_id = {r.id: r for r in cal.residuals}
    assert by_id["vit"].fitted and not by_id["gpt2"].fitted
    from ipuexp.calibration.band import error_band
    from ipuexp.calibration.evidence import Point

    far = Point(8, 4096.0, "tokens", 2048.0, 0.4, 64, "optimum")
    band = error_band("gpt2", 8, 4, 256, residuals=cal.residuals, point=far)
    worst = max(abs(by_id["gpt2"].loo_error_pct), abs(shipped_gpt2.loo_error_pct))
    floor = 100 * ((1 + worst / 100) ** 2 - 1)
    assert band.pct >= floor - 1e-6 and any("at least twice it, compounded" in r for r in band.reasons)


@pytest.mark.slow
def test_calibration_name_changes_a_run_and_is_logged(calibrated):
    tmp, _, _ = calibrated
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{user.ENV: str(tmp / "cals")})
    env.pop("MLFLOW_TRACKING_URI", None)
    results = {}
    for name in ("null", "pub2"):
        proc = subprocess.run([sys.executable, "-m", "ipuexp", "+recipe=vit_b16", f"calibration={name}",
                               "measured.samples_per_s=7000", f"hydra.run.dir=run_{name}", "report.charts=never"],
                              cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "Measured: 7,000 samples/s" in proc.stdout
        results[name] = json.loads((tmp / f"run_{name}" / "result.json").read_text())
    shipped, mine = (results[n]["throughput"]["samples_per_s"] for n in ("null", "pub2"))
    assert mine != pytest.approx(shipped, rel=1e-3)
    assert results["pub2"]["measured"]["over_predicted"] == pytest.approx(7000 / mine)

    from mlflow import MlflowClient

    c = MlflowClient(f"sqlite:///{tmp / 'mlflow.db'}")
    runs = c.search_runs([c.get_experiment_by_name("vit_b16").experiment_id])
    tags = {r.data.tags["calibration"]: r for r in runs}
    assert set(tags) == {"shipped", "pub2"}
    assert tags["pub2"].data.tags["calibration_hash"] == user.load("pub2", tmp / "cals").digest
    assert tags["pub2"].data.metrics["measured_over_predicted"] == pytest.approx(7000 / mine)
    assert tags["pub2"].data.metrics["throughput_samples_per_s"] == pytest.approx(mine)


@pytest.mark.slow
def test_measured_only_fits_the_rows_and_says_what_it_costs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(user.ENV, str(tmp_path / "cals"))
    monkeypatch.setenv("COLUMNS", "80")
    assert cmd.main([str(_two_published(tmp_path)), "--name", "only", "--measured-only"]) == 0
    out = capsys.readouterr().out
    cal = user.load("only", tmp_path / "cals")
    assert cal.fitted_on == "measured"
    for r in cal.rows:  # fitted on these rows alone, they come much closer
        assert abs(r.after_samples_per_s / r.measured_samples_per_s - 1) < 0.5 * abs(
            r.before_samples_per_s / r.measured_samples_per_s - 1)
    words = " ".join(out.split())
    assert "The shipped rows are up to -" in words and "use this calibration for runs like the measured ones" in words


def test_rows_that_cannot_be_used_are_named_and_left_out():
    shipped = {"amp_efficiency": 0.7619, "vector_efficiency": 0.5928, "compute_set_cycles": 1106.0,
               "gw_step_latency_s": 1.128e-05, "host_step_s": 0.087}
    rows = [Measurement("typo", ("+recipe=bert_base", "options.gradient_acumulation=8"), 1000.0),
            Measurement("oom", ("+recipe=bert_base", "data.micro_batch_size=256"), 1000.0),
            Measurement("units", ("+recipe=bert_base",), 1e6),
            Measurement("ok", ("+recipe=bert_base",), 5000.0)]
    usable, left = prepare(rows, shipped)
    assert [m.case.row.id for m in usable] == ["ok"]
    why = {m.id: text for m, text in left}
    assert why["typo"].startswith("does not compose: options.gradient_acumulation")
    assert why["oom"].startswith("does not fit in IPU memory")
    assert f"more than {OUTLIER_FACTOR:g}x off" in why["units"] and "--keep-outliers" in why["units"]
    assert all("\n" not in text for text in why.values())
    kept, left = prepare(rows[2:], shipped, keep_outliers=True)
    assert [m.case.row.id for m in kept] == ["units", "ok"] and not left


def test_nothing_is_written_when_no_row_can_be_fitted(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(user.ENV, str(tmp_path / "cals"))
    path = _csv(tmp_path / "bad.csv", [("typo", "+recipe=bert_base options.gradient_acumulation=8", 1000)])
    assert cmd.main([str(path), "--name", "x"]) == cmd.EXIT_FIT_FAILED
    captured = capsys.readouterr()
    assert "left out: typo" in captured.out
    assert captured.err.strip().splitlines() == ["ipuexp.calibrate: no measured run to fit on; nothing written"]
    assert not (tmp_path / "cals").exists()


@pytest.mark.parametrize("content, message", [
    ("id,overrides\nx,+recipe=bert_base\n", "missing column measured_samples_per_s"),
    ("id,overrides,measured_samples_per_s\nx,+recipe=bert_base,fast\n", "line 2: measured_samples_per_s='fast'"),
    ("id,overrides,measured_samples_per_s\nx,+recipe=bert_base,-3\n", "allowed a number > 0"),
    ("id,overrides,measured_samples_per_s\nx,+recipe=bert_base,3\nx,+recipe=bert_large,3\n", "id='x' is also on"),
    ("id,overrides,measured_samples_per_s\n", "no rows"),
])
def test_bad_files_are_one_line(tmp_path, content, message):
    path = tmp_path / "m.csv"
    path.write_text(content)
    with pytest.raises(MeasurementError, match=message):
        read_csv(path)


def test_command_line_errors_exit_2_without_writing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(user.ENV, str(tmp_path / "cals"))
    path = _csv(tmp_path / "m.csv", [("x", "+recipe=bert_base", 1000)])
    assert cmd.main([str(path), "--name", "shipped"]) == cmd.EXIT_BAD_INPUT
    assert cmd.main(["--name", "x"]) == cmd.EXIT_BAD_INPUT
    assert cmd.main([str(tmp_path / "none.csv"), "--name", "x"]) == cmd.EXIT_BAD_INPUT
    user.save(user.UserCalibration("x", "measured", {"amp_efficiency": 0.5}, {"amp_efficiency": 0.7}))
    assert cmd.main([str(path), "--name", "x"]) == cmd.EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("ipuexp.calibrate: ") for line in err)
    assert "exists; --overwrite replaces it" in err[-1]


def test_its_tables_at_80_columns_to_a_pipe_cut_no_figure(monkeypatch, capsys):
    """The refit's tables (the measured runs, the fitted constants) by the terminal_table rule at 80 columns with
    output to a pipe: no line over 80, every figure whole, run names folded."""
    from types import SimpleNamespace

    from ipuexp.commands import calibrate_print as show
    from ipuexp.terminal_table import terminal_console

    monkeypatch.setenv("COLUMNS", "80")
    console = terminal_console()
    runs = [[GPT2, "102", "265", "+159.9", "110", "+7.8", "+35.1", "±23%"],
            [VIT + "_with_a_longer_name_than_any", "7,319", "10,675", "+45.8", "7,402", "+1.1", "+12.4", "±43%"]]
    show._table(console, "Measured runs: predicted before and after the refit",
                ("run", "measured", "before", "err", "after", "err", "LOO", "band"), runs)
    constants = {"amp_efficiency": 0.7623, "gw_step_latency_s": 1.133e-05, "compute_set_cycles": 1130.0}
    replaced = {"amp_efficiency": 0.785, "gw_step_latency_s": 1.2e-05, "compute_set_cycles": 1106.0}
    ranges = {"amp_efficiency": (0.739, 0.848), "gw_step_latency_s": (9.477e-06, 1.29e-05)}
    show._constants(console, SimpleNamespace(constants=constants, replaced=replaced, loo_range=lambda: ranges))
    out = capsys.readouterr().out
    assert "\x1b[" not in out and max(len(line) for line in out.splitlines()) <= 80
    figures = [cell for row in runs for cell in row[1:]] + [
        "0.785", "0.7623", "-2.9%", "0.739..0.848", "1.2e-05", "1.133e-05", "9.477e-06..1.29e-05", "1106", "1130",
        "+2.2%"]
    for figure in figures:
        assert figure in out, figure
    assert "gpt2_medium_" in out and "amp_efficiency" in out
