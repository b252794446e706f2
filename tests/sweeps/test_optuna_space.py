"""The study's objectives and directions (ipuexp's jobs: run metrics; another Hydra app: its returned values), and
hydra-optuna-sweeper's deprecated ``search_space`` setting."""
from __future__ import annotations

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from ipuexp.config.errors import ConfigError
from ipuexp.sweeps.optuna_space import directions, from_search_space, objectives_of, space


def test_ipuexps_jobs_keep_their_objectives_and_directions() -> None:
    names = objectives_of(None, own=True)
    assert names == ["throughput_samples_per_s"] and directions(names, None) == ["maximize"]
    both = objectives_of(["throughput_samples_per_s", "peak_tile_memory_bytes"], own=True)
    assert directions(both, None) == ["maximize", "minimize"]
    assert directions(["step_time_s"], "maximize") == ["maximize"]


def test_another_app_minimises_one_value_or_has_one_direction_per_value() -> None:
    assert objectives_of(None, own=False) == []
    assert directions([], None) == ["minimize"]  # hydra-optuna-sweeper's default
    assert directions([], "maximize") == ["maximize"]
    assert directions([], ["minimize", "maximize"]) == ["minimize", "maximize"]
    with pytest.raises(ConfigError, match=r"^hydra.sweeper.objectives=\['mfu'\] is invalid: allowed: null in a Hydra "
                                          "app other than python -m ipuexp"):
        objectives_of(["mfu"], own=False)
    with pytest.raises(ConfigError, match="^hydra.sweeper.direction=.*allowed: maximize or minimize, one, or a list"):
        directions([], ["up"])


def test_range_includes_its_stop_as_in_hydra_optuna_sweeper() -> None:
    d = space(["a=range(1,3)", "b=range(0.5,5.5,step=1)", "c=shuffle(range(1,3))"]).distributions
    assert d["a"] == IntDistribution(1, 3)
    assert d["b"] == FloatDistribution(0.5, 5.5, step=1)
    assert set(d["c"].choices) == {1, 2}  # a shuffled range is Hydra's list of its values


def test_the_deprecated_search_space_is_read_with_its_warning() -> None:
    entries = {"x": {"type": "float", "low": -5.5, "high": 5.5, "step": 0.5},
               "n": {"type": "int", "low": 1, "high": 100, "log": True},
               "c": {"type": "categorical", "choices": [1, 2]}}
    with pytest.warns(UserWarning, match="`hydra.sweeper.search_space` is deprecated"):
        read = from_search_space(entries, None)
    assert read == {"x": FloatDistribution(-5.5, 5.5, step=0.5), "n": IntDistribution(1, 100, log=True),
                    "c": CategoricalDistribution([1, 2])}
    with pytest.warns(UserWarning, match="Both hydra.sweeper.params and hydra.sweeper.search_space"):
        assert from_search_space(entries, {}) == {}
    with pytest.warns(UserWarning), pytest.raises(ConfigError, match=r"^hydra.sweeper.search_space.x=.*allowed: "
                                                                     "type: int | float | categorical"):
        from_search_space({"x": {"type": "bogus"}}, None)
