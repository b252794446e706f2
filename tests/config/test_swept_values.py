"""A sweep's other values, checked on the first point's configuration, pass and fail as composing them does."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from ipuexp.commands.run import preflight
from ipuexp.config.errors import ConfigError
from ipuexp.config.swept_values import check_points

FIRST = ["+recipe=bert_large", "options.gradient_accumulation=256", "options.io.num_io_tiles=0"]


def _error(call):
    try:
        call()
    except ConfigError as err:
        return str(err)
    return None


@pytest.mark.parametrize("value", ["options.gradient_accumulation=1024", "options.gradient_accumulation=abc",
                                   "options.gradient_accumulation=1.5", "options.gradient_accumulation=null",
                                   "options.io.num_io_tiles=33", "options.partials_type=bogus",
                                   "options.pipeline.schedule=interleaved", "options.available_memory_proportion=0.x",
                                   "options.available_memory_proportion=[0.1,0.2,0.3,0.4]", "data.micro_batch_size=-1",
                                   "options.nonexistent=1", "options.pipeline=1", "system=pod99", "system=pod64"])
def test_a_value_passes_or_fails_as_composing_it_does(value):
    cfg = preflight(FIRST)
    before = OmegaConf.to_yaml(cfg)
    key = value.split("=", 1)[0]
    point = [value if o.startswith(key + "=") else o for o in FIRST]
    if point == FIRST:
        point = FIRST + [value]
    composed = []
    quick = _error(lambda: check_points(cfg, FIRST, [point], lambda p: composed.append(p) or preflight(p, rules=False)))
    assert quick == _error(lambda: preflight(point, rules=False))
    assert OmegaConf.to_yaml(cfg) == before  # the first point's configuration is left as it was
    if key in ("options.gradient_accumulation", "options.io.num_io_tiles") and quick is None:
        assert composed == []  # a plain value of a swept key is not composed again
    if key == "system":
        assert composed == [point]  # a config group is
