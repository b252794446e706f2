"""Fixtures of the config and importer tests: composition exactly as ``python -m ipuexp`` does it, the published files."""
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
def data_dir() -> Path:
    """The published files kept with the tests (``tests/data``)."""
    from published import DATA

    return DATA
