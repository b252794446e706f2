"""The predicted-against-measured view of ``python -m ipuexp.report``: runs fabricated in a throwaway MLflow store
with the metrics and tags the run code logs (``measured_samples_per_s``, ``engine_mode``, ``calibration``...)."""
import csv
import re
import time
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from ipuexp.commands.report import main
from ipuexp.report.predicted_vs_measured import (calibration_warning, host_points, in_band, measured_points, plot_measured,
                                    print_measured, summary, under_calibration)
from ipuexp.report.sweep import Point, ReportError, Sweep
from ipuexp.report.sweep_load import load

LONG = "gradient_accumulation={},num_io_tiles=32,available_memory_proportion=0.2"
# name, predicted samples/s, band (+-%), measured samples/s (None: not measured); the error is predicted/measured - 1
ANALYTIC = [
    (LONG.format(256), 700.0, 10.0, 735.0),     # -4.8%: inside +-10%
    (LONG.format(1024), 900.0, 10.0, 1010.0),   # -10.9%: outside
    (LONG.format(2048), 1102.5, 5.0, 1050.0),   # +5.0%: on the band's edge, inside
    (LONG.format(4096), 1300.0, None, 1200.0),  # +8.3%: no band logged
    (LONG.format(512), 800.0, 10.0, None),      # predicted only
]
PEAK = 600_000_000
MEASURED_PEAK = 650_000_000


def _log(uri, name, metrics, tags=None, experiment="bert_large"):
    """One FINISHED job run, as ``track_job`` leaves it (a config hash tag, the curated metrics)."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    c = MlflowClient(uri)
    exp = c.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else c.create_experiment(experiment)
    run = c.create_run(exp_id, run_name=name, tags={"config_hash": name, **(tags or {})})
    now = int(time.time() * 1000)
    c.log_batch(run.info.run_id, metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()])
    c.set_terminated(run.info.run_id, "FINISHED")


def _analytic(uri, memory=False, calibration=None):
    tags = {"engine_mode": "analytic"}
    if calibration:
        tags.update(calibration=calibration[0], calibration_hash=calibration[1])
    for name, predicted, band, measured in ANALYTIC:
        m = {"throughput_samples_per_s": predicted, "peak_ipu_memory_bytes": PEAK, "fits": 1.0}
        if band is not None:
            m["error_band_pct"] = band
        if measured is not None:
            m.update(measured_samples_per_s=measured, measured_over_predicted=measured / predicted)
        if memory and measured is not None and predicted < 1000:
            m.update(measured_ipu_memory_bytes=MEASURED_PEAK, measured_over_predicted_memory=MEASURED_PEAK / PEAK)
        _log(uri, name, m, tags)


def _functional(uri, name="functional run"):
    _log(uri, name, {"measured_samples_per_s": 12.5, "final_loss": 2.0}, {"engine_mode": "functional"})


def _text(sweep, width=200):
    console = Console(width=width, record=True)
    print_measured(sweep, console)
    return console.export_text()


def test_runs_read_back_with_their_measurements(db_uri):
    _analytic(db_uri, memory=True, calibration=("mine", "3f2a9c1e"))
    _functional(db_uri)
    _log(db_uri, "old functional", {"measured_samples_per_s": 9.0})  # before engine_mode: host measurements only
    functional = {"engine_mode": "functional"}
    _log(db_uri, "functional, predicted", {"throughput_samples_per_s": 1000.0, "measured_samples_per_s": 12.0,
                                           "measured_over_predicted": 0.012}, functional)
    # Given measured.samples_per_s, a functional run logs that as its measurement and its host figure apart.
    _log(db_uri, "functional, IPU measured", {"throughput_samples_per_s": 1000.0, "measured_samples_per_s": 950.0,
                                              "measured_over_predicted": 0.95, "host_samples_per_s": 11.0}, functional)
    sweep = load(db_uri, "bert_large")
    by_name = {p.name: p for p in sweep.points}
    p = by_name[LONG.format(1024)]
    assert (p.throughput, p.measured, p.measured_on, p.measured_memory) == (900.0, 1010.0, "ipu", MEASURED_PEAK)
    assert p.calibration == "mine (3f2a9c1e)" and p.calibration_name == "mine"
    assert p.measured_ratio == pytest.approx(1010 / 900)
    f = by_name["functional run"]
    assert (f.throughput, f.measured, f.measured_on, f.ipu_measured) == (12.5, 12.5, "host", None)
    assert f.calibration is None and f.calibration_name == "shipped"
    assert by_name["old functional"].measured_on == "host"
    f = by_name["functional, predicted"]
    assert (f.throughput, f.measured_on, f.ipu_measured, f.measured_ratio) == (1000.0, "host", None, None)
    f = by_name["functional, IPU measured"]
    assert (f.throughput, f.measured_on, f.ipu_measured, f.measured_ratio) == (1000.0, "ipu", 950.0, 0.95)
    assert by_name[LONG.format(512)].measured_on is None
    assert [q.name for q in measured_points(sweep)] == [
        LONG.format(4096), LONG.format(2048), "functional, IPU measured", LONG.format(1024), LONG.format(256)]
    assert sorted(q.name for q in host_points(sweep)) == ["functional run", "functional, predicted", "old functional"]


def test_table_gives_the_error_and_the_band(db_uri):
    _analytic(db_uri)
    _functional(db_uri)
    sweep = load(db_uri, "bert_large")
    assert [in_band(p) for p in measured_points(sweep)] == [None, True, False, True]
    text = _text(sweep)
    cells = [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()]
    rows = {c[0].replace(", ", ","): c[1:] for c in cells if c[0].startswith("gradient")}  # names broken at commas
    assert rows[LONG.format(1024)] == ["900.0", "±10%", "1,010.0", "-10.9%", "✗"]
    assert rows[LONG.format(256)] == ["700.0", "±10%", "735.0", "-4.8%", "✓"]
    assert rows[LONG.format(2048)] == ["1,102.5", "±5%", "1,050.0", "+5.0%", "✓"]
    assert rows[LONG.format(4096)] == ["1,300.0", "-", "1,200.0", "+8.3%", "-"]
    assert LONG.format(512) not in rows  # predicted only
    assert "Predicted vs measured" in text and "MiB" not in text  # no run has a measured memory
    assert ("4 runs: median |predicted/measured - 1| 6.7%, worst -10.9%; 2 of 3 in band, 1 with no band"
            in text)
    # The functional run's host measurement is no IPU's: it is counted apart, never compared.
    assert "functional run" not in rows and "12.5" not in text
    assert "1 functional run left out: a host CPU's throughput is no IPU's" in text


def test_only_functional_runs_give_no_table(db_uri):
    _functional(db_uri, "a")
    _functional(db_uri, "b")
    sweep = load(db_uri, "bert_large")
    assert measured_points(sweep) == [] and summary([]) is None
    text = _text(sweep)
    assert "Predicted vs measured" not in text and text.startswith("2 functional runs left out")


@pytest.mark.parametrize("memory", [False, True])
def test_table_fits_80_columns_and_keeps_every_figure_whole(db_uri, memory):
    _analytic(db_uri, memory=memory)
    sweep = load(db_uri, "bert_large")
    text = _text(sweep, width=80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in text  # no cell, no header cut short
    head = "\n".join(lines[:lines.index(next(line for line in lines if line.startswith("─")))])
    assert [head.count(h) for h in ("predicted", "measured", "samples/s", "band", "memory")] == (
        [2, 3, 2, 2, 2] if memory else [1, 2, 2, 2, 0])  # the title says "measured" too
    cells = [cell for line in lines for cell in line.split()]
    for _, predicted, band, measured in ANALYTIC[:4]:
        assert f"{predicted:,.1f}" in cells and f"{measured:,.1f}" in cells
        assert f"{100 * (predicted / measured - 1):+.1f}%" in cells
        assert band is None or f"±{band:.0f}%" in cells
    assert ("MiB" in text) is memory
    if memory:  # in the header's unit, MiB
        assert "MiB" in text and f"{PEAK / 2**20:,.1f}" in cells and f"{MEASURED_PEAK / 2**20:,.1f}" in cells
        assert cells.count(f"{MEASURED_PEAK / 2**20:,.1f}") == 2
    # The run names fold onto more lines instead of pushing a figure off the edge.
    assert "gradient_accumulation=1024,num_io_tiles=32,available_memory_proportion=0.2" not in text


def test_packed_runs_compare_sequences():
    p = Point("r", "r", {}, throughput=100.0, peak_memory=None, fits=True, error_band_pct=10.0,
              sequences_per_s=200.0, measured=230.0, measured_on="ipu")
    assert p.measured_ratio == pytest.approx(1.15) and in_band(p) is False
    text = _text(Sweep("packed", [p]))
    assert "sequences/s" in text and "samples/s" not in text and "-13.0%" in text  # 200 against 230


def test_calibration_mix_is_named_and_filtered(db_uri, tmp_path: Path, capsys):
    _analytic(db_uri, calibration=("mine", "3f2a9c1e"))
    _log(db_uri, "shipped run", {"throughput_samples_per_s": 500.0, "error_band_pct": 10.0,
                                 "peak_ipu_memory_bytes": PEAK,
                                 "measured_samples_per_s": 510.0, "measured_over_predicted": 1.02},
         {"engine_mode": "analytic"})  # no calibration tag: the shipped one
    sweep = load(db_uri, "bert_large")
    assert calibration_warning(sweep) == ("runs made under 2 calibrations (mine (3f2a9c1e), shipped): their "
                                          "predictions are not comparable; --calibration NAME reports one")
    assert calibration_warning(under_calibration(sweep, "mine")) is None
    assert [p.name for p in under_calibration(sweep, "shipped").points] == ["shipped run"]

    out = tmp_path / "report"
    assert main(["bert_large", "--uri", db_uri, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.index("runs made under 2 calibrations") < printed.index("bert_large: 6 configurations")
    assert main(["bert_large", "--uri", db_uri, "--out", str(out), "--calibration", "shipped"]) == 0
    printed = capsys.readouterr().out
    assert "calibrations" not in printed and "bert_large: 1 configuration," in printed
    assert "1 run: median |predicted/measured - 1| 2.0%, worst -2.0%; 1 of 1 in band" in printed
    assert main(["bert_large", "--uri", db_uri, "--calibration", "theirs"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("ipuexp.report: calibration='theirs': no runs of 'bert_large' were made under it; calibrations "
                   "present: mine, shipped")


def test_one_name_two_hashes_is_a_mix_the_filter_cannot_split():
    pts = [Point(n, n, {}, 1.0, None, True, calibration=c, calibration_name="mine")
           for n, c in (("a", "mine (11111111)"), ("b", "mine (22222222)"), ("c", None))]
    assert calibration_warning(Sweep("e", pts)) == (
        "runs made under 2 calibrations (mine (11111111), mine (22222222)): their predictions are not comparable; "
        "calibration mine changed between them: re-run the older runs to compare")
    shipped = [Point("s", "s", {}, 1.0, None, True),
               Point("t", "t", {}, 1.0, None, True, calibration="shipped (abcd0123)", calibration_name="shipped")]
    assert calibration_warning(Sweep("e", shipped)) is None  # an untagged run is under the shipped calibration
    with pytest.raises(ReportError, match="calibrations present: mine$"):
        under_calibration(Sweep("e", pts), "shipped")


def test_cli_prints_the_view_and_writes_the_chart_and_csv(db_uri, tmp_path: Path, capsys):
    import matplotlib.image

    _analytic(db_uri, memory=True)
    _functional(db_uri)
    out = tmp_path / "report"
    assert main(["bert_large", "--uri", db_uri, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.index("bert_large: 6 configurations") < printed.index("Predicted vs measured")
    assert "predicted_vs_measured.png" in printed[printed.index("Wrote"):]
    image = matplotlib.image.imread(out / "predicted_vs_measured.png")
    assert image.shape[0] > 500 and image.shape[1] > 500 and image.std() > 0.01
    red = np.abs(image[..., :3] - np.array([0xd6, 0x27, 0x28]) / 255).sum(axis=-1) < 0.1  # C3: outside the band
    blue = np.abs(image[..., :3] - np.array([0x1f, 0x77, 0xb4]) / 255).sum(axis=-1) < 0.1  # C0: inside
    assert red.sum() > 30 and blue.sum() > 30
    rows = {r["run"]: r for r in csv.DictReader((out / "sweep.csv").open())}
    r = rows[LONG.format(1024)]
    assert float(r["measured_samples_per_s"]) == 1010.0
    assert float(r["measured_over_predicted"]) == pytest.approx(1010 / 900)
    assert r["measured_on"] == "ipu" and r["calibration"] == "shipped"
    assert float(rows["functional run"]["measured_samples_per_s"]) == 12.5
    assert rows["functional run"]["measured_on"] == "host" and rows["functional run"]["measured_over_predicted"] == ""
    assert rows[LONG.format(512)]["measured_samples_per_s"] == ""


def test_no_measurement_no_view(log_sweep, db_uri, tmp_path: Path, capsys):
    log_sweep("s1", [(256, 0, 700.0, [500_000_000, 420_000_000], True),
                     (512, 0, 800.0, [500_000_000, 400_000_000], True)])
    out = tmp_path / "report"
    assert main(["bert_large", "--uri", db_uri, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Predicted vs measured" not in printed and "calibrations" not in printed
    assert not (out / "predicted_vs_measured.png").exists()


def test_chart_of_the_measured_runs(tmp_path: Path):
    pts = [Point(f"r{n}", f"r{n}", {}, throughput=t, peak_memory=None, fits=True, error_band_pct=b, measured=m,
                 measured_on="ipu") for n, (_, t, b, m) in enumerate(ANALYTIC[:4])]
    path = plot_measured(Sweep("bert_large", pts), tmp_path / "x" / "predicted_vs_measured.png")
    assert path.exists() and path.stat().st_size > 10_000
