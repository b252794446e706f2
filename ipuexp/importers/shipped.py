"""Copies of the published configuration files the README's import examples name (``ipuexp/importers/published/``),
so that those commands run from any folder: a ``FILE`` that does not exist but whose path ends with one of these
files' paths in its repository is read from the copy."""
from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Dict, Optional, Tuple

_HERE = Path(__file__).resolve().parent / "published"

# Path in its repository -> (the copy under published/, the file's public locator).
SHIPPED: Dict[str, Tuple[str, str]] = {
    "nlp/bert/pytorch/configs_pretraining.yml": (
        "graphcore-examples-3cc8f81/configs_pretraining.yml",
        "graphcore/examples@3cc8f81:nlp/bert/pytorch/configs_pretraining.yml"),
    "applications/tensorflow/bert/configs/pretrain_large_384_phase2.json": (
        "graphcore-examples-187775b/pretrain_large_384_phase2.json",
        "graphcore/examples@187775b:applications/tensorflow/bert/configs/pretrain_large_384_phase2.json"),
    "Graphcore/benchmarks/bert/implementations/popart/configs/pod16-closed.json": (
        "mlperf-training-v1.1/pod16-closed.json",
        "mlcommons/training_results_v1.1:Graphcore/benchmarks/bert/implementations/popart/configs/pod16-closed.json"),
}


def shipped_copy(given: str) -> Optional[Tuple[Path, str]]:
    """(the shipped copy, its public locator) for a path that ends with a shipped file's path, else None."""
    parts = PurePosixPath(given.replace("\\", "/")).parts
    for key, (copy, locator) in SHIPPED.items():
        key_parts = PurePosixPath(key).parts
        if len(parts) >= len(key_parts) and parts[len(parts) - len(key_parts):] == key_parts:
            return _HERE / copy, locator
    return None
