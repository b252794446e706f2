"""The models captured from scripts, by name, for ``model.target`` (``ipuexp.poptorch.registry:NAME``).

The configuration's rules count a model's layer blocks by building it (``ipuexp.models.zoo_layers``): the factory
here gives the captured blocks' names, each a layer, with no computation of their own. The graph the engines
use is the capture itself, which the session puts into the captures' memo under the job's key, so a job never
captures this factory's model."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Dict, List

_SPLITS: Dict[str, List[str]] = {}


def register(block_names: List[str], graph_fingerprint: Any) -> str:
    """The ``model.target`` for a captured model with these blocks."""
    digest = hashlib.sha256(json.dumps(graph_fingerprint, sort_keys=True, default=str).encode()).hexdigest()[:12]
    name = f"script_{digest}"
    _SPLITS[name] = list(block_names)
    return f"{__name__}:{name}"


def __getattr__(name: str) -> Callable[[], Any]:
    if name not in _SPLITS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def blocks() -> Any:
        from torch import nn

        from ipuexp.models.blocks import Block, PipelinedModel

        return PipelinedModel([Block(n, nn.Identity(), is_layer=True) for n in _SPLITS[name]], name=name)

    return blocks
