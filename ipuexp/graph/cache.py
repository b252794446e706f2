"""JSON cache of captured graphs, one file per (model config, micro-batch size, torch version, code version).

JSON rather than pickle: a cache file is data that anyone can read, diff and trust. The key also covers the
source of the zoo and capture code (and of a custom model's module), so editing a model invalidates its entry; a
Transformers model's key holds its configuration's content and the Transformers version.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Dict, Optional

from ipuexp.graph import types
from ipuexp.graph.types import BlockCapture, Graph, OpRecord, TensorInfo
from ipuexp.models.cache_folder import unusable
from ipuexp.models.flags_cache import default_cache_dir, module_file
from ipuexp.models.hf_source import HF, fingerprint, resolve
from ipuexp.models.spec import ModelNode

_MODEL_FIELDS = ("name", "size", "sequence_length", "image_size", "num_layers", "num_classes", "vocab_size",
                 "target")
_PACKAGE = Path(__file__).resolve().parent.parent




def _source_digest(target: Optional[str]) -> str:
    """Hash of the code a capture depends on: the zoo, the capture itself, and a custom model's module."""
    h = hashlib.sha256()
    files = sorted((_PACKAGE / "models").glob("*.py")) + sorted((_PACKAGE / "graph").glob("*.py"))
    own = module_file(target)
    if own is not None:
        files.append(own)
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def cache_key(model_cfg: ModelNode, micro_batch_size: int) -> str:
    """Hex digest identifying one capture."""
    from importlib.metadata import version

    fields = {k: getattr(model_cfg, k, None) for k in _MODEL_FIELDS}
    fields = {k: (v if v is None or isinstance(v, (int, float, bool)) else str(v)) for k, v in fields.items()}
    if getattr(model_cfg, "mask_tokens", None) is not None:  # only when set: earlier captures keep their keys
        fields["mask_tokens"] = int(model_cfg.mask_tokens)
    if getattr(model_cfg, "sequences_per_pack", 1) not in (None, 1):  # packed rows: a model of their own
        fields["sequences_per_pack"] = int(model_cfg.sequences_per_pack)
    if getattr(model_cfg, "split_layers", False):
        fields["split_layers"] = True
    if fields.get("name") == HF:
        fields["hf"] = fingerprint(model_cfg)  # the configuration's content, not just its name or path
    payload = {
        "model": fields,
        "micro_batch_size": micro_batch_size,
        "torch": version("torch"),
        "format": types.CAPTURE_FORMAT,
        "source": _source_digest(fields.get("target") if fields.get("name") == "custom" else None),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


def entry_path(model_cfg: ModelNode, micro_batch_size: int, cache_dir: Optional[str] = None) -> Path:
    """File holding the capture of ``model_cfg`` at ``micro_batch_size``."""
    root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    name = str(getattr(model_cfg, "name", "model"))
    if name == "custom":
        variant = str(getattr(model_cfg, "target", "") or "").replace(":", ".").rpartition(".")[2]
    elif name == HF:
        variant = resolve(model_cfg).label
    else:
        variant = str(getattr(model_cfg, "size", ""))
    label = "".join(c if c.isalnum() or c in "_-" else "_" for c in f"{name}-{variant}")
    return root / "graphs" / f"{label}-mbs{micro_batch_size}-{cache_key(model_cfg, micro_batch_size)}.json"


def graph_to_dict(graph: Graph) -> Dict[str, Any]:
    return dataclasses.asdict(graph)


def graph_from_dict(data: Dict[str, Any]) -> Graph:
    blocks = []
    for b in data["blocks"]:
        b = dict(b)
        b["inputs"] = [TensorInfo(**t) for t in b["inputs"]]
        b["outputs"] = [TensorInfo(**t) for t in b["outputs"]]
        b["ops"] = [OpRecord(**r) for r in b["ops"]]
        blocks.append(BlockCapture(**b))
    return Graph(**{**data, "blocks": blocks})


def load(path: Path) -> Optional[Graph]:
    """The cached graph, or None when absent or unreadable (an unreadable entry is recaptured)."""
    try:
        return graph_from_dict(json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def save(graph: Graph, path: Path) -> None:
    """Write atomically: concurrent sweep jobs may capture the same model at once. A folder that cannot be written
    is a warning: the cache only saves time."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(graph_to_dict(graph), separators=(",", ":")))
        os.replace(tmp, path)
    except OSError as err:
        unusable(path.parent.parent, err)
    finally:  # a full disk: no half-written file left behind
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
