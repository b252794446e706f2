"""Names for the two shapes a configuration has.

A job's configuration is first a composed ``DictConfig`` (what Hydra hands the job, what the rule table reads,
``hydra`` node and interpolations included), then, once checked, the schema's dataclasses (``ExperimentConfig``,
through ``OmegaConf.to_object``). Functions say which they take.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Union

from omegaconf import DictConfig

if TYPE_CHECKING:
    from ipuexp.config.schema import ExperimentConfig

ConfigNode = DictConfig
"""A composed configuration, or one of its nodes, not yet converted to the schema's dataclasses."""

AnyConfig = Union[DictConfig, "ExperimentConfig"]
"""Either shape: readers that only look values up by key (``checks.value_at``) take both."""
