"""End-of-epoch checkpoints of a functional run, in ``<run directory>/checkpoints``.

One file per epoch (``epoch_0003.pt``), written to a temporary name and renamed so that a crash never leaves a
half-written checkpoint behind; ``latest`` names the newest complete one. ``engine.resume=true`` restarts from it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Optional, Union

FOLDER = "checkpoints"
LATEST = "latest"


def folder(run_dir: Union[str, Path]) -> Path:
    return Path(run_dir) / FOLDER


def save(run_dir: Union[str, Path], epoch: int, payload: Dict[str, Any]) -> Path:
    """Write the checkpoint taken after ``epoch`` completed epochs; returns its path."""
    import torch

    d = folder(run_dir)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"epoch_{epoch:04d}.pt"
    tmp = d / f".{path.name}.tmp"
    pointer = d / f".{LATEST}.tmp"
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)
        pointer.write_text(path.name + "\n")
        os.replace(pointer, d / LATEST)
    finally:  # a full disk: no half-written file left behind
        tmp.unlink(missing_ok=True)
        pointer.unlink(missing_ok=True)
    return path


def latest(run_dir: Union[str, Path]) -> Optional[Path]:
    """The newest complete checkpoint, or None."""
    d = folder(run_dir)
    pointer = d / LATEST
    if pointer.is_file():
        path = d / pointer.read_text().strip()
        if path.is_file():
            return path
    found = sorted(d.glob("epoch_*.pt"))
    return found[-1] if found else None


def load(path: Union[str, Path]) -> Dict[str, Any]:
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)
