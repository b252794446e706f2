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


@pytest.mark.parametrize("value", [0.0, -0.5, float("nan"), float("inf"), 7.0])
def test_a_constant_outside_its_physical_range_is_refused_when_loaded(cal_dir, value):
    from ipuexp.calibration.fitted import FITTED

    user.save(_calibration(amp=0.5))
    path = cal_dir / "mine.yaml"
    path.write_text(path.read_text().replace("amp_efficiency: 0.5", f"amp_efficiency: {value}", 1))
    with pytest.raises(user.CalibrationError) as err:
        user.load("mine")
    text = str(err.value)
    low, high = FITTED["amp_efficiency"]
    assert "\n" not in text and "constants.amp_efficiency=" in text and f"[{low:g}, {high:g}]" in text


def test_a_file_without_its_residuals_is_refused_when_loaded(cal_dir):
    user.save(_calibration())
    path = cal_dir / "mine.yaml"
    text = path.read_text()
    path.write_text(text[:text.index("residuals:")])  # cut off where the residuals begin
    with pytest.raises(user.CalibrationError) as err:
        user.load("mine")
    assert "residuals=[] is invalid" in str(err.value) and "\n" not in str(err.value)


def test_a_bad_calibration_stops_a_run_before_it_starts(cal_dir):
    from ipuexp.config.compose import compose_config

    user.save(_calibration(amp=0.5))
    path = cal_dir / "mine.yaml"
    path.write_text(path.read_text().replace("host_step_s: 0.05", "host_step_s: 0.0", 1))
    with pytest.raises(ConfigError) as err:
        compose_config(["+recipe=bert_base", "calibration=mine"])
    assert "calibration='mine' is invalid" in str(err.value) and "constants.host_step_s=0.0" in str(err.value)


def test_save_without_overwrite_refuses_a_name_taken_meanwhile(cal_dir):
    first = user.save(_calibration(amp=0.5), overwrite=False)
    with pytest.raises(user.NameTaken):
        user.save(_calibration(amp=0.6), overwrite=False)
    assert user.load("mine").constants["amp_efficiency"] == 0.5
    assert first.exists() and not list(cal_dir.glob("*.tmp")) and not list(cal_dir.glob(".*"))
    assert user.free_name("mine") == "mine-2"


def _save_in_child(directory: str, amp: float, queue) -> None:
    try:
        user.save(_calibration(amp=amp), __import__("pathlib").Path(directory), overwrite=False)
        queue.put(("saved", amp))
    except user.NameTaken:
        queue.put(("taken", amp))


def test_two_writers_of_one_name_never_replace_each_other(tmp_path):
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    for attempt in range(5):
        folder = tmp_path / str(attempt)
        queue = ctx.Queue()
        procs = [ctx.Process(target=_save_in_child, args=(str(folder), amp, queue)) for amp in (0.5, 0.6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        outcomes = sorted(queue.get(timeout=5) for _ in procs)
        saved = [amp for what, amp in outcomes if what == "saved"]
        assert len(saved) == 1, outcomes  # one wrote the name, the other was told
        assert user.load("mine", folder).constants["amp_efficiency"] == saved[0]
        assert [p.name for p in folder.iterdir()] == ["mine.yaml"]  # no temporary file of either


def test_a_failed_write_leaves_no_temporary_file(cal_dir, monkeypatch):
    import errno
    import os

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        user.save(_calibration())
    assert list(cal_dir.iterdir()) == []


def test_a_file_fitted_on_something_unknown_is_refused(cal_dir):
    user.save(_calibration())
    path = cal_dir / "mine.yaml"
    path.write_text(path.read_text().replace("fitted_on: shipped+measured", "fitted_on: guesses", 1))
    with pytest.raises(user.CalibrationError, match=r"fitted_on='guesses' is invalid: allowed: shipped\+measured"):
        user.load("mine")
