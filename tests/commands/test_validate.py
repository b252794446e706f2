"""The validation command: in-sample and held-out errors on the calibration table, error bands, exit codes,
calibration blocks."""
from __future__ import annotations

import shutil

import pytest

from ipuexp.commands import validate as v
from ipuexp.commands import validate_notes
from ipuexp.calibration import RUNS_DIR, Row, load_rows
from ipuexp.calibration.band import Residual, error_band, load_residuals
from ipuexp.config.store import CONF_DIR
from ipuexp.fitting.fit import FITTED, MODES
from ipuexp.fitting.validate_report import Outcome, Report

# The rows the model does not explain (docs/emulator.md, "ViT-B/16" and "GPT-2 at 1,024 tokens"): reported, not
# fitted; the tests say how far off each is, so that a fix shows up here.
UNEXPLAINED = "vit_b16_finetune_bow_pod16_pytorch"
GPT2 = "gpt2_medium_wikitext103_sl1024_mk2_pod16_optimum"
# The one row with a short PopTorch host call (256 samples): the Optimum loop's cost per call, held out, falls back
# to its prior (sized from Optimum's notebook runs, docs/emulator.md).
ROBERTA = "roberta_base_squad2_sl384_mk2_pod16_optimum"
# Packed MLPerf BERT: predicted and fitted in sequences/s, its attention and feed-forward halves placed as it ran,
# on 4 replicas of 4 IPUs (POD16) and 8 and 16 replicas of 8 IPUs (POD64, POD128).
PACKED = "bert_large_packed_mlperf11_mk2_pod16_popart"
MLPERF = (PACKED, "bert_large_packed_mlperf11_mk2_pod64_popart", "bert_large_packed_mlperf11_mk2_pod128_popart")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    cfg = v.load_config()
    cfg.cache_dir = str(tmp_path_factory.getbasetemp() / "captures")
    return cfg, v.run(cfg)


def test_config_sets_the_thresholds():
    cfg = v.load_config()
    assert (cfg.mape_threshold, cfg.max_row_error, cfg.loo_mape_threshold, cfg.loo_worst, cfg.held_out_worst) == \
        (6, 20, 10, 20, 25)
    assert cfg.max_out_of_band == 1 and set(cfg.unexplained) == {UNEXPLAINED, GPT2}
    assert cfg.csv is None  # the table shipped with the package


def test_every_row_has_a_configuration_and_a_residual():
    rows = load_rows()
    assert len(rows) >= 12 and {r.family for r in rows} == {"bert", "resnet", "vit", "gpt", "roberta"}
    for row in rows:
        assert (RUNS_DIR / f"{row.id}.yaml").exists()
    assert {r.id for r in load_residuals()} == {r.id for r in rows}
    assert [r.id for r in rows if r.packed] == list(MLPERF)


@pytest.mark.slow
def test_generalisation_on_the_full_table(report):
    cfg, rep = report
    assert {o.row.id for o in rep.outcomes} == {r.id for r in load_rows()} and rep.unpredicted == []
    assert {o.row.id for o in rep.outcomes if o.unexplained} == {UNEXPLAINED, GPT2}
    # Packed MLPerf BERT, in sequences/s, at POD16, POD64 and POD128: each within 10% in sample.
    for row_id in MLPERF:
        assert abs(next(o for o in rep.outcomes if o.row.id == row_id).error) <= 10.0, row_id
    # In sample: MAPE within the 6% gate, worst within 20%.
    assert rep.mape <= cfg.mape_threshold and rep.worst <= cfg.max_row_error
    # Leave-one-out: MAPE within 10%, worst within 20% (RoBERTa included: its loop's cost falls back to a prior
    # sized from Optimum's notebook runs, and the AutoIncrement stages carry its fill and drain).
    assert rep.mode_mape("leave-one-out") <= cfg.loo_mape_threshold
    assert rep.mode_worst("leave-one-out") <= cfg.loo_worst
    roberta = next(o for o in rep.outcomes if o.row.id == ROBERTA)
    assert abs(roberta.error) <= 3.0 and abs(roberta.loo_error) < 15.0
    # Leave-one-size-out and -family-out within 25%.
    assert rep.mode_worst("leave-one-size-out") <= cfg.held_out_worst
    assert rep.mode_worst("leave-one-family-out") <= cfg.held_out_worst
    # Error band: the published value is inside the band of the leave-one-out prediction for every row but one,
    # the unexplained rows included (outside: ViT-B/16, +44% against the ±37% its leave-one-out band takes from
    # the other families).
    assert rep.out_of_band <= 1 and rep.covered_all >= len(rep.outcomes) - 1
    assert all(v.gates(rep, cfg).values()), v.gates(rep, cfg)
    # Every held-out fit refitted every constant.
    for mode in MODES[1:]:
        for consts in rep.held_out_constants[mode].values():
            assert set(consts) == set(FITTED)
    vit = next(o for o in rep.outcomes if o.row.id == UNEXPLAINED)
    assert 30.0 < vit.error < 60.0  # the gap docs/emulator.md describes
    gpt2 = next(o for o in rep.outcomes if o.row.id == GPT2)
    # every pow, the backward's x ** 2 included, at PopLibs' POWER rate closes most of the old +160%
    assert 10.0 < gpt2.error < 30.0


@pytest.mark.slow
def test_resnet_per_ipu_throughput_falls_with_the_system_like_the_published(report):
    _, rep = report
    by_id = {o.row.id: o for o in rep.outcomes}

    def per_ipu(row_id: str, value: str) -> float:
        o = by_id[row_id]
        return (o.predicted if value == "predicted" else o.row.published) / o.row.ipus

    base = "resnet50_mk2_pod16_tf1_mlperf11"
    for big in ("resnet50_mk2_pod128_tf1_mlperf11", "resnet50_mk2_pod256_tf1_mlperf11"):
        fall = {k: 100 * (1 - per_ipu(big, k) / per_ipu(base, k)) for k in ("predicted", "published")}
        assert abs(fall["predicted"] - fall["published"]) <= 5.0, fall


def test_error_band_widens_outside_the_calibration():
    rows = [Residual("a", "bert", "bow", 16, 8, 2040, 2.0), Residual("b", "bert", "bow", 16, 32, 512, -4.0),
            Residual("c", "resnet", "mk2", 16, 20, 10, 3.0), Residual("d", "resnet", "mk2", 128, 20, 2, 5.0)]
    near = error_band("bert-large", 16, 8, 2000, residuals=rows)
    assert near is not None and near.pct >= 3.0 and "residuals of the bert rows: a, b" in near.reasons[0]
    # A family's band comes from its own rows only: ResNet's residuals do not widen BERT's.
    assert near.pct == pytest.approx(2.0 * ((2.0 ** 2 + 4.0 ** 2) / 2) ** 0.5)
    new_family = error_band("gpt2-medium", 16, 8, 2000, residuals=rows)
    larger = error_band("resnet50", 1024, 20, 2, residuals=rows)
    far_batch = error_band("resnet50", 16, 256, 10, residuals=rows)
    assert new_family.pct > near.pct and any("gpt" in r for r in new_family.reasons)
    assert larger.pct > error_band("resnet50", 128, 20, 2, residuals=rows).pct
    assert any("larger than any calibration row" in r for r in larger.reasons)
    assert any("micro-batch 256" in r for r in far_batch.reasons)
    assert error_band("bert", 16, 8, 2000, exclude="a", residuals=rows[:1]) is None
    same_gen = error_band("resnet50", 16, 20, 10, residuals=rows, ipu="mk2")
    other_gen = error_band("resnet50", 16, 20, 10, residuals=rows, ipu="bow")
    assert other_gen.pct > same_gen.pct and any("no resnet calibration row on bow" in r for r in other_gen.reasons)


def test_a_micro_batch_below_every_fitted_rows_takes_the_largest_unexplained_error():
    rows = [Residual("a", "bert", "bow", 16, 8, 2040, 2.0), Residual("b", "bert", "bow", 16, 2, 512, -4.0),
            Residual("g", "gpt", "mk2", 16, 1, 256, 20.0, fitted=False),
            Residual("v", "vit", "bow", 16, 17, 30, 46.0, fitted=False)]
    one = error_band("bert-base", 16, 1, 512, residuals=rows)
    two = error_band("bert-base", 16, 2, 512, residuals=rows)
    # twice the largest unexplained error as a factor: 1.46 ** 2 = 2.13x
    assert one.pct == pytest.approx(113.16) and two.pct < 10.0
    assert any("micro-batch 1, below every fitted row's (2)" in r and "+46% of v" in r for r in one.reasons)
    # the unexplained row's own band does not lean on itself: 1.2 ** 2 = 1.44x
    assert error_band("bert-base", 16, 1, 512, exclude="v", residuals=rows).pct == pytest.approx(44.0)


def test_exit_code_follows_the_thresholds():
    row = Row("r", "bow", 100.0)
    good = Report([Outcome(row, 104.0)], {})
    bad_mape = Report([Outcome(row, 112.0)], {})
    cfg = v.ValidateConfig()
    assert v.exit_code(good, cfg) == 0
    assert v.exit_code(bad_mape, cfg) == 1
    cfg.max_row_error = 3.0
    assert v.exit_code(good, cfg) == 1


def test_calibration_block_carries_a_note_per_constant(tmp_path, monkeypatch):
    rep = Report([Outcome(Row("a", "bow", 1.0), 1.0)], {n: 0.5 for n in FITTED}, {"a": {n: 0.4 for n in FITTED}})
    priors = v._priors("bow")
    text = validate_notes.calibration_block(rep, "bow", priors, ["a"])
    for name in [*FITTED, *priors]:
        assert f"  # {name}: " in text and f"\n  {name}: " in text
    assert "leave-one-out refits 0.4 to 0.4" in text
    assert "No mk2 row" in validate_notes.calibration_block(rep, "mk2", priors, ["a"])
    # --write replaces only the closing calibration block.
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    monkeypatch.setattr(validate_notes, "CONF_DIR", conf)  # where write_block reads the configs
    before = (conf / "ipu" / "bow.yaml").read_text()
    validate_notes.write_block("bow", text)
    after = (conf / "ipu" / "bow.yaml").read_text()
    head = before[: before.index("\ncalibration:")]
    assert after.startswith(head) and after.endswith(text)
    from omegaconf import OmegaConf

    assert OmegaConf.load(conf / "ipu" / "bow.yaml").calibration.amp_efficiency == 0.5


def test_exclude_names_the_rows_and_refuses_write(capsys):
    assert v.main(["--exclude", "no_such_row", "--no-loo"]) == 2
    err = capsys.readouterr().err
    assert "exclude='no_such_row'" in err and "vit_b16_finetune_bow_pod16_pytorch" in err and "\n" not in err.strip()
    assert v.main(["--exclude", UNEXPLAINED, "--fit", "--write"]) == 2
    assert "--write" in capsys.readouterr().err


def test_missing_table_exits_2(tmp_path, capsys):
    assert v.main(["--csv", str(tmp_path / "none.csv"), "--no-loo"]) == 2
    assert "none.csv" in capsys.readouterr().err


def test_report_exits_0_and_check_exits_1_on_a_failing_gate(monkeypatch, capsys):
    # The shipped table with a gate no fit can pass: the report still exits 0, --check exits 1.
    strict = v.load_config()
    strict.mape_threshold = 0.0
    strict.leave_one_out = False
    monkeypatch.setattr(v, "load_config", lambda: strict)
    assert v.main(["--no-loo"]) == 0
    out = capsys.readouterr().out
    assert "gate fails: in-sample MAPE" in out or "gate fails" in out
    assert v.main(["--no-loo", "--check"]) == 1


def test_report_fits_80_columns_and_keeps_every_figure(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    rows = [Row("gpt2_medium_wikitext103_sl1024_mk2_pod16_optimum", "mk2", 102.0),
            Row("resnet50_mk2_pod256_tf1_mlperf11", "mk2", 325_997.0)]
    rep = Report([Outcome(rows[0], 274.9), Outcome(rows[1], 326_764.0)], {"amp_efficiency": 0.79})
    v.print_report(rep, v.ValidateConfig(leave_one_out=False))
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "326,764" in out and "325,997" in out and "+169.5" in out
    assert "gpt2_medium_wikitext" in out.replace("\n", "")


def test_the_table_at_80_columns_to_a_pipe_cuts_no_figure_and_keeps_the_marks(monkeypatch, capsys):
    """Every figure of every row whole (``180,125``, ``±158% ✓``), the ✓ and ✗ marks kept, no line over 80, plain
    text: the terminal_table rule, with output to a pipe."""
    monkeypatch.setenv("COLUMNS", "80")
    rows = [Row("gpt2_medium_wikitext103_sl1024_mk2_pod16_optimum", "mk2", 102.0),
            Row("resnet50_mk2_pod128_tf1_mlperf11", "mk2", 157_002.0),
            Row("bert_large_packed_mlperf11_mk2_pod128_popart", "mk2", 9_028.0)]
    outcomes = [Outcome(rows[0], 274.9, unexplained="a mechanism the model lacks"),
                Outcome(rows[1], 180_125.0), Outcome(rows[2], 9_128.0)]
    for o, loo, band in zip(outcomes, (274.9, 403_888.0, 9_200.0), (23.0, 158.0, 5.0)):
        o.loo, o.band = loo, band
        o.held_out = {mode: loo * (1 + 0.01 * n) for n, mode in enumerate(MODES[1:])}
    rep = Report(outcomes, {"amp_efficiency": 0.79})
    rep.loo_constants = {"row": {"amp_efficiency": 0.79}}
    v.print_report(rep, v.ValidateConfig())
    out = capsys.readouterr().out
    assert "\x1b[" not in out and max(len(line) for line in out.splitlines()) <= 80
    table = out.split("pred, publ:")[0]
    for o in outcomes:
        cells = [f"{o.predicted:,.0f}", f"{o.row.published:,.0f}", f"{o.error:+.1f}",
                 *(f"{o.mode_error(m):+.1f}" for m in MODES[1:]),
                 f"±{o.band:.0f}%" + (" ✓" if o.in_band else " ✗")]
        line = next(line for line in table.splitlines() if cells[0] in line)
        for cell in cells:
            assert cell in line, (cell, line)
    assert "±158% ✓" in table and "±23% ✗" in table and " *" in table


def test_without_transformers_the_report_runs_the_other_rows_and_check_refuses(monkeypatch, capsys):
    """The base install (no hf extra): the report runs every row it can, names the model.name=hf rows on one
    wrapped paragraph with the clone's install line, and exits 0; --check and --fit, whose gates and constants need
    every row, exit 2 on one line."""
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # importlib.util.find_spec then answers None
    monkeypatch.setenv("COLUMNS", "80")
    hf_rows = [r.id for r in load_rows() if "optimum" in r.id]
    assert v.main(["--no-loo"]) == 0
    out = capsys.readouterr().out
    said = " ".join(out.split("not run: ", 1)[1].split("gate ")[0].split())
    assert said.startswith('3 rows are model.name=hf and need the hf extra (pip install -e ".[hf]")')
    assert all(i in said for i in hf_rows) and "gate passes: in-sample MAPE" in out
    assert all(line == line.rstrip() for line in out.splitlines())
    for flag in ("--check", "--fit"):
        assert v.main(["--no-loo", flag]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and 'pip install -e ".[hf]"' in err
