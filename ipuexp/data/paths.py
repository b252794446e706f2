"""Where data files are: the packaged MNIST test set, and ``data.path`` made absolute."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

PACKAGED_MNIST = Path(__file__).resolve().parent / "mnist"
"""The official MNIST test set (10,000 images, IDX format; LeCun, Cortes and Burges, CC BY-SA 3.0), shipped so
that the functional recipes run without a download; ``data.path`` points elsewhere for the full set."""


def resolve_path(path: Optional[str]) -> Path:
    """A data path as ipuexp reads it: None is the MNIST test set shipped with ipuexp, ``~`` is expanded, and a
    relative path is taken from the directory the command was launched from (Hydra moves each job's working
    directory, ``hydra.job.chdir``)."""
    if path is None:
        return PACKAGED_MNIST
    p = Path(os.path.expanduser(str(path)))
    return p if p.is_absolute() else (launch_dir() / p).resolve()


def launch_dir() -> Path:
    """The folder the command was launched from: relative data, recipe and calibration paths are taken from it."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.cwd)
    return Path.cwd()


def unwritable(folder: Path) -> Optional[str]:
    """Why files cannot be written into ``folder``, or None. A folder that does not exist yet is judged by the
    nearest one above it that does (where it would be made); an existing one by creating and removing a probe file,
    so a read-only disk or a missing permission is found in milliseconds, before any long work, and nothing is left
    behind."""
    import tempfile

    p = Path(os.path.expanduser(str(folder)))
    p = p if p.is_absolute() else Path.cwd() / p
    probe = p
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a folder"
    try:
        fd, name = tempfile.mkstemp(prefix=".ipuexp-probe-", dir=probe)
    except OSError as err:
        return f"{probe} cannot be written ({err.strerror or err})"
    os.close(fd)
    os.unlink(name)
    return None
