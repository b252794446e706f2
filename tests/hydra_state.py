"""Fixtures that keep Hydra's process-wide state per test, for the test folders that compose configurations through
Hydra itself (``runner``, ``sweeps``): their ``conftest.py`` imports them."""
from __future__ import annotations

from typing import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def _ipuexp_configs() -> None:
    """The schema and recipes in Hydra's ConfigStore (once per process, before any test saves Hydra's state)."""
    from ipuexp.config.store import register

    register()


@pytest.fixture(autouse=True)
def _restore_hydra(_ipuexp_configs: None, hydra_restore_singletons: None) -> Iterator[None]:
    """Hydra's process-wide state (ConfigStore, version base, ...) as it was before each test."""
    yield
