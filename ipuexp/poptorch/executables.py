"""PopTorch's executable files: ``PoplarExecutor.compileAndExport`` / ``save`` write what rebuilds the executor (its
options, whether it trains, its optimizer and, with ``export_model=True``, the model itself: ipuexp compiles from
the model, so an executable is the model and its options); ``poptorch.load`` (``executable_load``) rebuilds it, and
``loadExecutable`` checks a file against an executor built in Python."""
from __future__ import annotations

from typing import Any

import torch

from ipuexp.poptorch.errors import Error

_KIND = "ipuexp.poptorch executable"


def save(executor: Any, filename: str, export_model: bool = True) -> None:
    """Into ``filename``, its folder made if missing; a folder's ``model.poptorch`` when it names a folder (as
    PopTorch saves)."""
    import os

    from ipuexp.poptorch.logs import log

    folder = os.path.dirname(filename)
    if folder and not os.path.isdir(folder):
        os.makedirs(folder)
    if os.path.isdir(filename):
        filename, folder = os.path.join(filename, "model.poptorch"), filename
        log.warning("save(): %s is a directory, saving model to %s", folder, filename)
    torch.save({"kind": _KIND, "training": executor.training, "options": executor.options,
                "model": executor.model if export_model else None,
                "optimizer": executor.optimizer if export_model and executor.training else None}, filename)


def _read(filename: str) -> dict:
    try:
        data = torch.load(filename, weights_only=False)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same error to the user
        raise Error(f"{filename} is not a PopTorch executable: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != _KIND:
        raise Error(f"{filename} is not a PopTorch executable written by compileAndExport or save")
    return data


def check(executor: Any, filename: str) -> None:
    """``loadExecutable``: the file must be an executable of a model of the same kind (training or inference)."""
    data = _read(filename)
    if data["training"] != executor.training:
        kinds = {True: "a training", False: "an inference"}
        raise Error(f"{filename} holds {kinds[data['training']]} executable; this model is "
                    f"{kinds[executor.training]} model")
