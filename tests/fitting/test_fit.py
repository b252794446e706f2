"""The fit of the calibration constants: what is fitted, and that the configured constants are its optimum."""
from __future__ import annotations

import pytest

from ipuexp.commands import validate as v
from ipuexp.calibration import load_rows
from ipuexp.fitting.fit import FITTED, PRIORS, fit, predict, prepare


def test_at_most_seven_fitted_constants():
    assert len(FITTED) <= 7 and set(PRIORS) == set(FITTED)


@pytest.mark.slow
def test_configured_constants_are_the_fit(tmp_path_factory):
    # The constants in conf/ipu are the optimum: refitting from them does not improve the fit.
    cfg = v.load_config()
    cfg.cache_dir = str(tmp_path_factory.getbasetemp() / "captures")
    cfg.leave_one_out = False  # the configured constants and the in-sample MAPE are all this test reads
    rep = v.run(cfg)
    cases = prepare([r for r in load_rows() if r.id not in cfg.unexplained], cfg.cache_dir)
    refit = fit(cases, rep.constants)
    errs = [abs(predict(c, refit) / c.row.published - 1) for c in cases]
    assert 100 * sum(errs) / len(errs) >= rep.mape - 0.3
