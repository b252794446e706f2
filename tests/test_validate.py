"""The validation command: predicted vs published throughput for every calibration row, fit and exit codes."""
from __future__ import annotations

import csv
import shutil

import pytest

from ipuexp import validate as v
from ipuexp.calibration import RUNS_DIR, TABLE, load_rows
from ipuexp.config.store import CONF_DIR

# The rows the configured constants were fitted on (their note in conf/ipu/*.yaml names them).
FITTED_ROWS = ["bert_large_ph1_bow_pod16_tf2", "bert_base_ph1_bow_pod16_pytorch", "resnet50_bow_pod16_tf1",
               "resnet50_mk2_pod16_tf1_mlperf11", "bert_large_ph2_sl384_bow_pod16_tf1"]


@pytest.fixture(scope="module")
def fitted_table(tmp_path_factory):
    """The shipped table cut to the rows the constants were fitted on."""
    path = tmp_path_factory.mktemp("table") / "fitted.csv"
    with open(TABLE, newline="") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader if r["id"] in FITTED_ROWS]
        fields = reader.fieldnames
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory, fitted_table):
    cfg = v.load_config()
    cfg.csv = str(fitted_table)
    cfg.cache_dir = str(tmp_path_factory.getbasetemp() / "captures")
    return cfg, v.run(cfg)


def test_config_sets_the_thresholds():
    cfg = v.load_config()
    assert cfg.mape_threshold == 10.0 and cfg.max_row_error == 20.0
    assert cfg.csv is None  # the table shipped with the package


def test_every_row_has_a_configuration():
    rows = load_rows()
    assert len(rows) >= 8 and set(FITTED_ROWS) <= {r.id for r in rows}
    for row in rows:
        assert (RUNS_DIR / f"{row.id}.yaml").exists()


@pytest.mark.slow
def test_calibrated_model_predicts_the_published_rows(report):
    cfg, rep = report
    assert [o.row.id for o in rep.outcomes] == FITTED_ROWS
    assert rep.mape <= 10.0
    assert rep.worst <= 20.0
    assert v.exit_code(rep, cfg) == 0
    # Leave-one-out: each row predicted by constants fitted without it.
    assert all(o.loo is not None for o in rep.outcomes)
    assert rep.loo_mape <= 15.0
    assert max(abs(o.loo_error) for o in rep.outcomes) <= 20.0
    for consts in rep.loo_constants.values():
        assert set(consts) == set(v.FITTED)


@pytest.mark.slow
def test_configured_constants_are_the_fit(report, fitted_table):
    # The constants in conf/ipu are the least-squares optimum: refitting from them does not move the error.
    cfg, rep = report
    cases = v.prepare(load_rows(fitted_table), cfg.cache_dir)
    refit = v.fit(cases, rep.constants)
    errs = [abs(v.predict(c, refit) / c.row.published - 1) for c in cases]
    assert 100 * sum(errs) / len(errs) >= rep.mape - 0.3


def test_exit_code_follows_the_thresholds():
    row = v.Row("r", "bow", 100.0)
    good = v.Report([v.Outcome(row, 105.0)], {})
    bad_mape = v.Report([v.Outcome(row, 112.0)], {})
    cfg = v.ValidateConfig()
    assert v.exit_code(good, cfg) == 0
    assert v.exit_code(bad_mape, cfg) == 1
    cfg.max_row_error = 4.0
    assert v.exit_code(good, cfg) == 1


def test_calibration_block_carries_a_note_per_constant(tmp_path, monkeypatch):
    rep = v.Report([v.Outcome(v.Row("a", "bow", 1.0), 1.0)], {n: 0.5 for n in v.FITTED},
                   {"a": {n: 0.4 for n in v.FITTED}})
    priors = v._priors("bow")
    text = v.calibration_block(rep, "bow", priors, ["a"])
    for name in [*v.FITTED, *priors]:
        assert f"  # {name}: " in text and f"\n  {name}: " in text
    assert "leave-one-out refits 0.4 to 0.4" in text
    assert "No mk2 row" in v.calibration_block(rep, "mk2", priors, ["a"])
    # --write replaces only the closing calibration block.
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    monkeypatch.setattr(v, "CONF_DIR", conf)
    before = (conf / "ipu" / "bow.yaml").read_text()
    v.write_block("bow", text)
    after = (conf / "ipu" / "bow.yaml").read_text()
    head = before[: before.index("\ncalibration:")]
    assert after.startswith(head) and after.endswith(text)
    from omegaconf import OmegaConf

    assert OmegaConf.load(conf / "ipu" / "bow.yaml").calibration.amp_efficiency == 0.5


def test_missing_table_exits_2(tmp_path, capsys):
    assert v.main(["--csv", str(tmp_path / "none.csv"), "--no-loo"]) == 2
    assert "none.csv" in capsys.readouterr().err
