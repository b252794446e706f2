"""Fixtures for the config tests: composition exactly as ``python -m ipuexp`` does it."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from ipuexp.config.compose import compose_config as _compose_config


@pytest.fixture
def compose_config() -> Callable:
    """The composed DictConfig for a list of overrides; composition errors raise the CLI's ConfigError."""
    return _compose_config


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared reference material beside the project (``../shared``)."""
    from published import SHARED as shared

    if not shared.is_dir():
        pytest.skip(f"shared reference material not found at {shared}")
    return shared
