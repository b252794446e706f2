"""Where the configs live and what the ConfigStore holds.

Every config ships inside the package (``ipuexp/conf``), so an installed wheel works from any directory: Hydra
reads it through its ``pkg://ipuexp.conf`` search path. The typed schema is stored as ``base_config`` (the first
entry of ``config.yaml``'s defaults list), so every YAML merged on top is type-checked and unknown keys are
rejected. Recipes are the ``recipe`` group (``conf/recipe/*.yaml``, global package): ``+recipe=NAME`` selects one
as in Hydra's "configuring experiments" pattern.
"""
from __future__ import annotations

from pathlib import Path

from hydra.core.config_store import ConfigStore

from ipuexp.config.schema import ExperimentConfig

CONF_MODULE = "ipuexp.conf"
CONF_PATH = f"pkg://{CONF_MODULE}"
"""Hydra's primary config path: the package's own ``conf`` folder, wherever the package is installed."""
CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
"""The same folder on disk (the package is installed unzipped), for readers other than Hydra."""
RECIPES_DIR = CONF_DIR / "recipe"


def recipe_names() -> list[str]:
    """The user recipes, as ``+recipe=NAME`` takes them."""
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def register() -> None:
    """Store the schema (idempotent: storing the same node again replaces it)."""
    ConfigStore.instance().store(name="base_config", node=ExperimentConfig)
