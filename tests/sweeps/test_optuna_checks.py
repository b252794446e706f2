"""The Optuna sweeper's settings and search space checked before a study starts: one ConfigError line each."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from ipuexp.config.errors import ConfigError
from ipuexp.sweeps.optuna_checks import check_settings
from ipuexp.sweeps.optuna_space import space

GOOD = dict(n_trials=4, n_jobs=2, max_failure_rate=0.5, storage=None, custom_search_space=None)


def _settings(**changes):
    return SimpleNamespace(**{**GOOD, **changes})


def test_good_settings_pass(tmp_path):
    check_settings(_settings())
    check_settings(_settings(storage=f"sqlite:///{tmp_path / 'study.db'}", max_failure_rate=0,
                             custom_search_space="os.path.join"))
    assert not (tmp_path / "study.db").exists()  # checking creates nothing


@pytest.mark.parametrize("key,value,allowed", [
    ("n_trials", 0, "an integer >= 1"),
    ("n_trials", -3, "an integer >= 1"),
    ("n_jobs", 0, "an integer >= 1"),
    ("max_failure_rate", 1.5, "from 0"),
    ("max_failure_rate", -0.1, "from 0"),
    ("storage", "foo://x", "a database URL"),
    ("storage", "study.db", "a database URL"),
    ("storage", "sqlite:study.db", "a database URL"),
    ("storage", "postgresql://user@127.0.0.1:1/db", "a database server that answers"),
    ("custom_search_space", "no_such_module.fn", "can be imported"),
    ("custom_search_space", "os.path.no_such_function", "has no callable"),
])
def test_a_bad_setting_is_one_line_naming_it(key, value, allowed):
    with pytest.raises(ConfigError) as err:
        check_settings(_settings(**{key: value}))
    text = str(err.value)
    assert text.startswith(f"hydra.sweeper.{key}={value!r} is invalid: allowed: ") and allowed in text
    assert "\n" not in text


def test_a_storage_file_that_cannot_be_kept_is_one_line(tmp_path):
    (tmp_path / "a_file").write_text("")
    (tmp_path / "junk.db").write_bytes(b"these bytes are not a database")
    for url, why in [(f"sqlite:///{tmp_path / 'a_file' / 's.db'}", "not a folder"),
                     (f"sqlite:///{tmp_path / 'junk.db'}", "not an SQLite database")]:
        with pytest.raises(ConfigError, match=why):
            check_settings(_settings(storage=url))


@pytest.mark.parametrize("override,allowed", [
    ("a=interval(0.5,0.1)", "low <= high"),
    ("a=tag(log,interval(0,1))", "low > 0"),
    ("a=tag(log,interval(-1.0,1.0))", "low > 0"),
    ("a=range(4,1)", "stop >= start"),
    ("a=range(8,1,-1)", "step > 0"),
])
def test_a_search_space_optuna_would_refuse_is_one_line(override, allowed):
    with pytest.raises(ConfigError) as err:
        space([override])
    assert str(err.value).startswith("a=") and allowed in str(err.value)


def test_an_unparsable_search_space_names_the_override():
    with pytest.raises(ConfigError, match=r"^a='choice\(1,2' is invalid"):
        space(["a=choice(1,2"])


def test_a_sampler_setting_optuna_refuses_is_one_line_naming_it():
    import functools

    from optuna.samplers import GridSampler, NSGAIISampler, QMCSampler

    from ipuexp.sweeps.optuna_checks import check_sampler

    with pytest.raises(ConfigError, match=r"^hydra\.sweeper\.sampler\.population_size=1 is invalid: allowed: "):
        check_sampler(functools.partial(NSGAIISampler, population_size=1))
    with pytest.raises(ConfigError, match=r"^hydra\.sweeper\.sampler\.qmc_type='foo' is invalid"):
        check_sampler(functools.partial(QMCSampler, qmc_type="foo"))
    assert isinstance(check_sampler(functools.partial(GridSampler), {"x": [1, 2]}, seed=3), GridSampler)
    assert isinstance(check_sampler(functools.partial(NSGAIISampler, population_size=4), seed=1), NSGAIISampler)
