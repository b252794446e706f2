"""Files written whole or not at all: into a temporary file beside the target, then renamed onto it. A full disk or a
killed process leaves the previous file (or none), never a truncated one that reads as valid."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator, Union


@contextlib.contextmanager
def whole(path: Union[str, Path]) -> Iterator[Path]:
    """A temporary path to write in the ``with`` block; renamed onto ``path`` when the block ends without an error,
    removed otherwise. Its name starts with a dot and ends ``.tmp``, so folder listings skip it."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def write_whole(path: Union[str, Path], data: Union[str, bytes]) -> Path:
    """``data`` (text as UTF-8) into ``path``, whole or not at all."""
    path = Path(path)
    with whole(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def savefig_whole(fig: object, path: Union[str, Path], **kwargs: object) -> None:
    """A matplotlib figure saved whole; its format from ``path``'s suffix, as ``savefig`` would take it."""
    path = Path(path)
    with whole(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", **kwargs)  # type: ignore[attr-defined]
