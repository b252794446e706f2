"""The error band grows with the distance from the calibration rows, and says when a prediction extrapolates."""
from __future__ import annotations

import json

import pytest

from ipuexp.calibration.band import Point, Residual, error_band, load_residuals
from ipuexp.calibration.reach import axis_excess, distance, extrapolation_floor, outside_axes, unreached


def _row(id_, loo, ipr=4, tokens=1024.0, samples=1536.0, headroom=0.2, ipus=16, framework="popart", fitted=True):
    return Residual(id_, "bert" if fitted else "gpt", "mk2", ipus, 2, 96, loo, fitted, ipr, tokens, "tokens", samples,
                    headroom, framework)


ROWS = [_row("a", 2.0), _row("b", -3.0, ipr=5, ipus=32), _row("c", 12.0, samples=65536.0, framework="tensorflow"),
        _row("d", 150.0, ipr=8, samples=512.0, framework="optimum", fitted=False)]


def test_a_row_reaches_within_a_factor_2_and_10_points_of_headroom():
    near = Point(4, 2048.0, "tokens", 3000.0, 0.25, 16, "popart")
    assert distance(ROWS[0].point, near) == 0
    far = Point(16, 1024.0, "tokens", 1536.0, 0.2, 64, "popart")
    assert axis_excess(ROWS[1].point, Point(7, 1024.0, "tokens"))["ipus_per_replica"] == pytest.approx(0.0)
    assert axis_excess(ROWS[0].point, Point(8, 1024.0, "tokens"))["ipus_per_replica"] == pytest.approx(1.0)  # 2x: one reach-width over
    pixels = Point(4, 1024.0, "pixels", 1536.0, 0.2, 16, "popart")
    assert axis_excess(ROWS[0].point, pixels)["elements"] == 1.0  # tokens against pixels: no common measure


def test_rows_outside_the_others_reach_set_the_floor():
    # c is the only TensorFlow row (no other row shares its framework); d is not fitted and does not count.
    assert [r.id for r in unreached([r for r in ROWS if r.fitted])] == ["c"]
    assert extrapolation_floor(ROWS) == (12.0, [ROWS[2]])


def test_a_far_configuration_is_extrapolated_with_a_wider_band():
    inside = error_band("bert-large", 16, 2, 96, residuals=ROWS, point=ROWS[0].point)
    far = Point(16, 64 * 128.0, "tokens", 65536.0, 0.05, 64, "popart")
    band = error_band("bert-large", 64, 64, 64, residuals=ROWS, point=far)
    assert inside.extrapolated is None and inside.nearest == "a"
    assert band.pct > inside.pct and band.pct >= 12.0
    assert band.extrapolated and "16 IPUs per replica (rows: 4, 5, 8)" in band.extrapolated
    assert "8,192 tokens per micro-batch (rows: 1,024)" in band.extrapolated
    assert any(r.startswith("extrapolated: ") for r in band.reasons)
    assert set(outside_axes(ROWS, far)) >= {"ipus_per_replica", "elements"}


def test_shipped_residuals_carry_every_axis():
    rows = load_residuals()
    assert len(rows) >= 14
    for r in rows:
        assert r.ipus_per_replica >= 1 and r.elements > 0 and r.elements_kind in ("tokens", "pixels")
        assert r.samples_per_step > 0 and r.tile_headroom is not None and r.framework
    assert {r.id for r in rows if not r.fitted} == {"vit_b16_finetune_bow_pod16_pytorch",
                                                     "gpt2_medium_wikitext103_sl1024_mk2_pod16_optimum"}


@pytest.mark.slow
def test_a_run_far_from_every_row_says_so(tmp_path, monkeypatch, capsys):
    """16 IPUs per replica at micro-batch 64: the console, result.json and the MLflow run carry the wider band
    and the note."""
    from ipuexp.commands.run import main as cli

    monkeypatch.chdir(tmp_path)
    base = ["+recipe=bert_large", "tracking.enabled=false", "report.charts=never"]
    far = base + ["system=pod16", "options.replication_factor=1", "data.micro_batch_size=64",
                  "options.gradient_accumulation=64", "options.pipeline.device_mapping=null",
                  "options.pipeline.layers_per_ipu=[2,2,2,2,2,2,2,2,1,1,1,1,1,1,1,1]",
                  "options.available_memory_proportion=0.2", "hydra.run.dir=far"]
    near = base + ["hydra.run.dir=near"]
    for args in (near, far):
        monkeypatch.setattr("sys.argv", ["ipuexp", *args])
        try:
            cli()
        except SystemExit as done:
            assert done.code in (0, None)
    out = capsys.readouterr().out
    r_near = json.loads((tmp_path / "near" / "result.json").read_text())["throughput"]
    r_far = json.loads((tmp_path / "far" / "result.json").read_text())["throughput"]
    assert r_near["extrapolated"] is None
    assert r_far["extrapolated"] and "16 IPUs per replica" in r_far["extrapolated"]
    assert r_far["error_band_pct"] > 2 * r_near["error_band_pct"]
    assert "Extrapolated: no calibration row reaches this configuration (16 IPUs per replica" in \
        " ".join(out.split())
