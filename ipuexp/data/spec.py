"""The ``data`` node of an experiment: what the data layer reads, described where it is read; the experiment schema
(``ipuexp.config.schema``) composes it. A function here takes either shape of it: the composed node (a
``DictConfig``) or the dataclass it converts to."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from omegaconf import DictConfig


@dataclass
class PackingConfig:
    """Packed sequences (Graphcore's packed BERT): several short sequences in one row of ``model.sequence_length``
    tokens, kept apart by a block-diagonal attention mask and given their own positions. A row is a pack: the
    micro-batch, the global batch and samples/s count packs, and throughput in sequences/s is packs/s times
    ``avg_sequences_per_pack``."""

    max_sequences_per_pack: int = 1
    """Sequences one pack holds at most (1: not packed). The per-sequence parts (the pooler and NSP head, their
    loss) run this many times per pack; the masked-LM head runs on ``model.mask_tokens`` positions per pack."""
    avg_sequences_per_pack: float = 1.0
    """Sequences per pack on average over the dataset: about 2.0 for Wikipedia at 512 tokens and at most 3 per pack
    (Graphcore's packing of the MLPerf BERT data)."""


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
    packing: PackingConfig = field(default_factory=PackingConfig)
    """Packed sequences (BERT pre-training): a sample is then a pack of sequences."""


DataNode = Union[DictConfig, DataConfig]
"""A ``data`` node: composed (``DictConfig``) or converted (``DataConfig``)."""
