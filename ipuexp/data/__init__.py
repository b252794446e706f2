"""Input data for the functional engine: IDX/MNIST files and synthetic samples."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from ipuexp.data.datasets import DatasetSplits, load_mnist, synthetic
from ipuexp.data.paths import PACKAGED_MNIST
from ipuexp.data.paths import resolve_path as launch_path
from ipuexp.data.spec import DataNode

__all__ = ["DatasetSplits", "PACKAGED_MNIST", "load_dataset", "resolve_path"]

DATASETS = ("synthetic", "mnist")


def resolve_path(path: Optional[str], base: Optional[Path] = None) -> Optional[Path]:
    """``data.path`` made absolute: a relative path is taken from ``base``, by default the launch directory as
    everywhere in ipuexp (``ipuexp.config.validate.resolve_path``: Hydra moves each job's working directory);
    None is the packaged MNIST test set."""
    if path is None or base is None:
        return launch_path(None if path is None else str(path))
    p = Path(str(path)).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def load_dataset(data_cfg: DataNode, input_spec: Sequence[Any], synthetic_samples: int, seed: int,
                 base: Optional[Path] = None) -> DatasetSplits:
    """The dataset ``data.dataset`` names; ``synthetic_samples`` sizes a synthetic one."""
    name = str(data_cfg.dataset)
    if name == "mnist":
        return load_mnist(resolve_path(data_cfg.path, base), data_cfg.train_split)
    if name == "synthetic":
        return synthetic(input_spec, synthetic_samples, seed)
    raise ValueError(f"data.dataset: {name!r} is not allowed; allowed: {', '.join(DATASETS)}")
