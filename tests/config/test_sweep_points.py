"""The points ``python -m ipuexp -m`` checks before a sweep starts: for an optimisation sweeper also each range's
stop, which ipuexp's Optuna sweeper samples (as hydra-optuna-sweeper reads ``range``)."""
from __future__ import annotations

from omegaconf import OmegaConf

from ipuexp.config.sweep_points import search_space_points, sweep_points


def _cfg(sweeper: str, params: dict) -> object:
    choices = {"hydra/sweeper": sweeper}
    return OmegaConf.create({"hydra": {"sweeper": {"params": params}, "runtime": {"choices": choices}}})


def test_an_optimisation_sweeper_checks_each_ranges_stop() -> None:
    overrides = ["+recipe=bert_base", "data.micro_batch_size=range(8,24,8)", "x=choice(1,2)"]
    first, *others = sweep_points(overrides)
    assert first == ["+recipe=bert_base", "data.micro_batch_size=8", "x=1"] and len(others) == 2  # 16, then x=2
    points = search_space_points(_cfg("optuna", {"y": "range(1,3)"}), first, overrides)
    assert points == [first + ["y=1"], first + ["y=2"],
                      ["+recipe=bert_base", "x=1", "data.micro_batch_size=24"], first + ["y=3"]]
    assert search_space_points(_cfg("ipuexp", {"y": "range(1,3)"}), first, overrides) == []  # a grid: no stop
