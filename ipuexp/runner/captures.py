"""Graph captures shared by the jobs of a sweep.

A capture depends only on the model configuration, the micro-batch size and the cache folder, so every job of a
sweep that varies other options (gradient accumulation, IO tiles, schedule, ...) needs the same one. The driver
captures each distinct model once, in a Ray task, before the jobs that need it start (see ``ipuexp.runner.sweep``);
the graph travels to the workers through Ray's object store and lands in the in-process memo below, so a worker
pays for a capture (or for reading it from the disk cache) at most once, and no two workers ever capture the same
model at the same time.
"""
from __future__ import annotations

import json
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Optional, Tuple
from ipuexp.models.spec import ModelNode

if TYPE_CHECKING:
    from ipuexp.config.types import ConfigNode

MEMO_SIZE = 16
"""Graphs kept per process; a sweep over micro-batch sizes or model variants needs one each."""

_memo: "OrderedDict[str, Any]" = OrderedDict()


def capture_key(model_cfg: ModelNode, micro_batch_size: int, cache_dir: Optional[str] = None) -> str:
    """The identity of a capture: the model's fields, the micro-batch size and the cache folder, as JSON."""
    from omegaconf import DictConfig, OmegaConf

    node = model_cfg if isinstance(model_cfg, DictConfig) else OmegaConf.structured(model_cfg)
    model = OmegaConf.to_container(node, resolve=True)
    return json.dumps({"model": model, "micro_batch_size": int(micro_batch_size), "cache_dir": cache_dir},
                      sort_keys=True, default=str)


def capture(model_cfg: ModelNode, micro_batch_size: int, cache_dir: Optional[str] = None) -> Any:
    """``ipuexp.graph.capture.capture`` with an in-process memo in front of its disk cache."""
    key = capture_key(model_cfg, micro_batch_size, cache_dir)
    graph = _memo.get(key)
    if graph is None:
        from ipuexp.graph.capture import capture as capture_graph

        graph = capture_graph(model_cfg, micro_batch_size, cache_dir=cache_dir)
        seed(key, graph)
    else:
        _memo.move_to_end(key)
    return graph


def seed(key: str, graph: Any) -> None:
    """Put a graph captured elsewhere (the driver's warm-up task) into this process's memo."""
    _memo[key] = graph
    _memo.move_to_end(key)
    while len(_memo) > MEMO_SIZE:
        _memo.popitem(last=False)


def cached(key: str) -> bool:
    return key in _memo


def ready(model_cfg: ModelNode, micro_batch_size: int, cache_dir: Optional[str] = None) -> bool:
    """Whether ``capture`` would read the graph (from this process's memo or the disk cache) rather than capture
    it: another process may then read it too, without capturing the same model at the same time."""
    if cached(capture_key(model_cfg, micro_batch_size, cache_dir)):
        return True
    from ipuexp.graph import cache

    return cache.entry_path(model_cfg, micro_batch_size, cache_dir).is_file()


def clear() -> None:
    _memo.clear()


def request(job_cfg: ConfigNode) -> Optional[Tuple[str, Any, int, Optional[str]]]:
    """``(key, model, micro_batch_size, cache_dir)`` of the capture an ipuexp job will make, else None.

    ``model`` is the object ``ipuexp.runner.evaluation.evaluate`` passes to the capture (the ModelConfig dataclass), so the key
    computed here equals the one the job computes. Configurations that are not ipuexp experiments (any other
    Hydra app run through the launcher) have no ``model`` / ``data.micro_batch_size`` and need nothing.
    """
    from omegaconf import OmegaConf

    model = OmegaConf.select(job_cfg, "model", default=None)
    mbs = OmegaConf.select(job_cfg, "data.micro_batch_size", default=None)
    if model is None or mbs is None:
        return None
    cache_dir = OmegaConf.select(job_cfg, "engine.cache_dir", default=None)
    try:
        model_obj = OmegaConf.to_object(model)
        key = capture_key(model_obj, mbs, cache_dir)
    except Exception:  # an invalid value: the job reports it itself, with its own message
        return None
    return key, model_obj, int(mbs), cache_dir
