"""The ``data`` node of an experiment: what the data layer reads, described where it is read; the experiment schema
(``ipuexp.config.schema``) composes it. A function here takes either shape of it: the composed node (a
``DictConfig``) or the dataclass it converts to."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from omegaconf import DictConfig


@dataclass
class DataConfig:
    """Input data."""

    micro_batch_size: int = 1
    """Samples per micro-batch (the batch a single IPU pipeline stage processes at once)."""
    dataset: str = "synthetic"
    """synthetic (analytic runs) or mnist (IDX files under ``path``)."""
    path: Optional[str] = None
    """Folder holding the dataset files (mnist: null is the test set shipped with ipuexp; a relative path is taken
    from the launch directory)."""
    io_precision: str = "auto"
    """Host-to-IPU input type: auto (model's dtype), float32, float16 or int8 (eight_bit_io)."""
    train_split: float = 0.8
    """Fraction of the dataset used for training when the dataset has no separate test split."""
    test_micro_batch_size: Optional[int] = None
    """Samples per micro-batch when scoring the held-out split (None: micro_batch_size)."""


DataNode = Union[DictConfig, DataConfig]
"""A ``data`` node: composed (``DictConfig``) or converted (``DataConfig``)."""
