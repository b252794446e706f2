"""The ``is_layer`` flags of a custom or Transformers model's blocks, kept on disk beside the graph captures.

The rule table asks how many layer blocks a model has before any run starts (``models.zoo_layers``). For a zoo model
that is a table; a custom or Transformers model must be built on the meta device, which imports torch and
Transformers (seconds) although a warm capture cache has everything else the run needs. The answer is kept per
model configuration, keyed like a capture: the configuration's content, the Transformers version and the source
of the model code (the zoo's and a custom model's module), so editing either builds the model again.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path
from typing import Callable, Optional, Tuple

_MODELS = Path(__file__).resolve().parent


def default_cache_dir() -> Path:
    """``IPUEXP_CACHE_DIR`` if set, else ``~/.cache/ipuexp`` (the graph captures' folder too)."""
    return Path(os.environ.get("IPUEXP_CACHE_DIR") or "~/.cache/ipuexp").expanduser()


def module_file(target: Optional[str]) -> Optional[Path]:
    """The source file of a custom model's module (``pkg.mod:fn`` or ``pkg.mod.fn``), if it has one."""
    if not target:
        return None
    module = target.partition(":")[0] if ":" in target else target.rpartition(".")[0]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec is not None else None
    return Path(origin) if origin and os.path.isfile(origin) else None


def _digest(key: str, target: Optional[str], hf: bool) -> Optional[str]:
    h = hashlib.sha256(key.encode())
    if hf:
        from importlib.metadata import PackageNotFoundError, version

        try:
            h.update(version("transformers").encode())
        except PackageNotFoundError:
            return None
    files = sorted(_MODELS.glob("*.py"))
    if target is not None:
        own = module_file(target)
        if own is None:
            return None  # code we cannot hash is built every time
        files.append(own)
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:32]


def layer_flags(key: str, target: Optional[str], hf: bool, build: Callable[[], Tuple[bool, ...]],
                fresh: bool = False) -> Tuple[bool, ...]:
    """The flags stored for this configuration (``key``: its content), or ``build()`` and store them; with
    ``fresh``, built and stored whatever is stored (a stored entry the rules found at odds with the configuration is
    checked against the model itself, and repaired). An unreadable cache only costs the build; an unwritable one is
    a warning."""
    digest = _digest(key, target, hf)
    path = default_cache_dir() / "layer-flags" / f"{digest}.json" if digest else None
    if path is not None and not fresh:
        try:
            stored = json.loads(path.read_text())
            if isinstance(stored, list) and stored and all(isinstance(f, bool) for f in stored):
                return tuple(stored)
        except (OSError, ValueError):
            pass
    flags = tuple(bool(f) for f in build())
    if path is not None:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(list(flags)))
            os.replace(tmp, path)
        except OSError as err:
            from ipuexp.models.cache_folder import unusable

            unusable(path.parent.parent, err)
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
    return flags
