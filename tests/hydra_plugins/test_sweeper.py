"""The default sweeper: Hydra's basic sweeper, less its batch pre-composition (the CLI's pre-flight checks every
swept value, the ray launcher composes each job)."""
from __future__ import annotations

from ipuexp.config.compose import compose_config


def test_default_sweeper_is_the_preflight_sweeper():
    cfg = compose_config(["+recipe=bert_large"], return_hydra_config=True)
    assert cfg.hydra.sweeper._target_ == "hydra_plugins.ipuexp_ray_launcher.sweeper.PreflightSweeper"


def test_batches_are_not_composed_before_launch():
    from hydra_plugins.ipuexp_ray_launcher.sweeper import PreflightSweeper

    class Loader:
        calls = 0

        def load_sweep_config(self, **kwargs):
            Loader.calls += 1

    sweeper = PreflightSweeper(max_batch_size=None, params=None)
    sweeper.config_loader = Loader()
    sweeper.config = object()
    sweeper.validate_batch_is_legal([["a=1"], ["a=2"]])
    assert Loader.calls == 0
