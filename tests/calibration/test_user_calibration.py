"""A user's calibration file: written whole, read back equal, selected with ``calibration=NAME``, refused on one
line when absent or broken."""
from __future__ import annotations

import pytest

from ipuexp.calibration import user
from ipuexp.calibration.band import Residual
from ipuexp.config.errors import ConfigError


def _calibration(name: str = "mine", amp: float = 0.5) -> user.UserCalibration:
    return user.UserCalibration(
        name=name, fitted_on="shipped+measured",
        constants={"amp_efficiency": amp, "vector_efficiency": 0.4, "compute_set_cycles": 900.0,
                   "gw_step_latency_s": 1.1e-05, "host_step_s": 0.05},
        replaced={"amp_efficiency": 0.7619, "vector_efficiency": 0.5928, "compute_set_cycles": 1106.0,
                  "gw_step_latency_s": 1.128e-05, "host_step_s": 0.087},
        loo_range={"amp_efficiency": [0.45, 0.55]},
        rows=[user.MeasuredRow("r1", "+recipe=bert_base options.gradient_accumulation=64", 1234.5, 1300.0, 1250.0,
                               1260.0, "bert", 700_000_000, 690_000_000)],
        residuals=[Residual("r1", "bert", "mk2", 16, 8, 64, 2.1), Residual("r2", "bert", "mk2", 16, 8, 512, -3.0)],
        created="2026-11-24T10:00:00+00:00", command="python -m ipuexp.calibrate runs.csv --name mine")


@pytest.fixture
def cal_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(user.ENV, str(tmp_path / "cals"))
    return tmp_path / "cals"


def test_file_round_trips(cal_dir):
    cal = _calibration()
    path = user.save(cal)
    assert path == cal_dir / "mine.yaml"
    assert path.read_text().startswith("# ipuexp calibration 'mine': select it with calibration=mine")
    assert user.load("mine") == cal
    assert user.available() == ["mine"]
    assert not list(cal_dir.glob("*.tmp"))


def test_reload_sees_a_rewritten_file(cal_dir):
    user.save(_calibration(amp=0.5))
    assert user.load("mine").constants["amp_efficiency"] == 0.5
    user.save(_calibration(amp=0.6))
    assert user.load("mine").constants["amp_efficiency"] == 0.6


def test_unknown_name_is_one_line_naming_what_exists(cal_dir):
    user.save(_calibration("other"))
    with pytest.raises(user.CalibrationError) as err:
        user.load("mine")
    text = str(err.value)
    assert "\n" not in text and text.startswith("calibration='mine' is invalid") and "other" in text
    assert "python -m ipuexp.calibrate" in text


def test_broken_file_is_one_line(cal_dir):
    cal_dir.mkdir()
    (cal_dir / "bad.yaml").write_text("name: bad\nfitted_on: measured\nconstants: {not_a_constant: 1.0}\n"
                                      "replaced: {}\n")
    with pytest.raises(user.CalibrationError, match=r"bad.yaml is not a calibration file: .*not_a_constant"):
        user.load("bad")


@pytest.mark.parametrize("name", ["shipped", "../x", "a b", ""])
def test_names_are_file_names(name):
    with pytest.raises(ValueError, match="--name"):
        user.check_name(name)


def test_selected_calibration_replaces_the_constants_and_the_bands(cal_dir):
    from ipuexp.config.compose import compose_config

    user.save(_calibration())
    shipped = compose_config(["+recipe=bert_base"])
    mine = compose_config(["+recipe=bert_base", "calibration=mine"])
    assert mine.ipu.calibration.amp_efficiency == 0.5 != shipped.ipu.calibration.amp_efficiency
    # the constants that no calibration fits stay as shipped
    assert mine.ipu.calibration.amp_grain == shipped.ipu.calibration.amp_grain
    assert user.residuals_for("mine") == tuple(_calibration().residuals)
    assert user.residuals_for(None) is None and user.residuals_for("shipped") is None


def test_missing_calibration_is_a_config_error_on_composing(cal_dir):
    from ipuexp.config.compose import compose_config

    with pytest.raises(ConfigError, match="calibration='nope'"):
        compose_config(["+recipe=bert_base", "calibration=nope"])


def test_tags_name_the_calibration_and_hash_its_constants():
    cal = _calibration()
    tags = user.tag_of("mine", {**cal.constants, "amp_grain": 16})
    assert tags == {"calibration": "mine", "calibration_hash": cal.digest}
    assert user.tag_of(None, cal.replaced)["calibration"] == "shipped"
    assert user.tag_of(None, cal.replaced)["calibration_hash"] != cal.digest
