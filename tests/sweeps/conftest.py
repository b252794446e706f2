"""Helpers for the sweep-choosing tests: the schema in Hydra's ConfigStore, and Hydra's state restored after each
test (``hydra_state``)."""
from __future__ import annotations

from hydra_state import _ipuexp_configs, _restore_hydra  # noqa: F401  (fixtures, found by name)
