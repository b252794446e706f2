"""Model zoo and the pipeline-block protocol.

``build_model(model_cfg)`` turns a ``ModelConfig`` into an :class:`ipuexp.PipelinedModel`; ``zoo_layers`` counts
its layer blocks from a table, without importing torch. Importing this package imports no torch either: the
model code is loaded by the functions that need it.
"""
from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable, Dict, Tuple

from ipuexp.models.hf_source import HF
from ipuexp.models.spec import ModelNode
from ipuexp.models.time_limit import TARGET_SECONDS, time_limit
from ipuexp.models.variants import CUSTOM, VARIANTS, resolve

__all__ = ["build_model", "zoo_layers", "zoo_ends", "load_target", "VARIANTS", "Block", "PipelinedModel", "InputSpec"]

# family -> (module, builder function)
_BUILDERS = {
    "bert": ("ipuexp.models.bert", "build_bert"),
    "gpt2": ("ipuexp.models.gpt2", "build_gpt2"),
    "vit": ("ipuexp.models.vit", "build_vit"),
    "resnet50": ("ipuexp.models.resnet", "build_resnet50"),
    "mnist_cnn": ("ipuexp.models.mnist", "build_mnist_cnn"),
}
# family -> (blocks before its first layer block, blocks after its last): what the builders above put around the
# layers (embeddings or stem; heads). The MNIST network of the PopTorch pipelining tutorial is four layer blocks.
_ENDS = {"bert": (True, True), "gpt2": (True, True), "vit": (True, True), "resnet50": (True, True),
         "mnist_cnn": (False, False)}


def load_target(target: Any) -> Callable[..., Any]:
    """Import ``package.module.function`` (or ``package.module:function``) for ``model.target``."""
    if not isinstance(target, str) or not target.strip():
        raise ValueError(f"model.target: {target!r} is not allowed; allowed: the dotted path of a callable "
                         "returning an ipuexp.PipelinedModel (required when model.name=custom)")
    module_name, sep, attr = target.partition(":")
    if not sep:
        module_name, _, attr = target.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"model.target: {target!r} is not a dotted path; allowed: 'package.module.function'")
    allowed = "allowed: an importable 'package.module.function' returning an ipuexp.PipelinedModel"
    try:
        with time_limit(TARGET_SECONDS, f"importing {module_name}"):
            module = importlib.import_module(module_name)
    except Exception as exc:  # not only ImportError: a SyntaxError, or whatever the module's own code raises
        why = f"{type(exc).__name__}: {exc}" if not isinstance(exc, (ImportError, TimeoutError)) else str(exc)
        raise ValueError(f"model.target: {target!r} cannot be imported ({' '.join(why.split())}); {allowed}") \
            from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"model.target: {target!r}: module {module_name} has no callable {attr!r}; {allowed}")
    return fn


def _build_custom(model_cfg: ModelNode) -> Any:
    from ipuexp.models.blocks import PipelinedModel

    target = getattr(model_cfg, "target", None)
    fn = load_target(target)
    # A factory with required parameters receives the ModelConfig (sequence_length, num_classes, ...).
    try:
        required = [p for p in inspect.signature(fn).parameters.values()
                    if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        required = []
    try:
        with time_limit(TARGET_SECONDS, f"{target}()"):
            model = fn(model_cfg) if required else fn()
    except Exception as exc:  # the user's factory failed: report it on one line, keep the cause chained
        raise ValueError(f"model.target: {target!r} raised {type(exc).__name__}: {exc}; "
                         "allowed: a callable returning an ipuexp.PipelinedModel") from exc
    if not isinstance(model, PipelinedModel):
        raise ValueError(f"model.target: {target!r} returned {type(model).__name__}; "
                         "allowed: a callable returning an ipuexp.PipelinedModel")
    return model


def build_model(model_cfg: ModelNode) -> Any:
    """The ``PipelinedModel`` for ``model_cfg`` (a ``ModelConfig`` or an equivalent DictConfig).

    Parameters are created on torch's current default device: wrap the call in ``with torch.device("meta")``
    to build without allocating weights.
    """
    if str(getattr(model_cfg, "name", "")) == CUSTOM:
        return _build_custom(model_cfg)
    if str(getattr(model_cfg, "name", "")) == HF:
        from ipuexp.models.hf import build_hf  # imports Transformers: only for model.name=hf

        return build_hf(model_cfg)
    variant = resolve(model_cfg)
    module_name, fn_name = _BUILDERS[variant.family]
    builder = getattr(importlib.import_module(module_name), fn_name)
    return builder(variant.hp, name=variant.id)


def __getattr__(name: str) -> Any:
    if name in ("Block", "PipelinedModel", "InputSpec"):
        from ipuexp.models import blocks

        return getattr(blocks, name)
    raise AttributeError(f"module 'ipuexp.models' has no attribute {name!r}")


def zoo_layers(model_cfg: ModelNode, fresh: bool = False) -> int:
    """Number of ``is_layer`` blocks of the configured model.

    Zoo models come from the table above without importing torch; a custom or Transformers model is built on the
    meta device (importing torch) and its layer blocks are counted, so a model that cannot be built or split is
    reported before a run starts; ``fresh``: built again, not read from the cache on disk.
    """
    if str(getattr(model_cfg, "name", "")) in (CUSTOM, HF):
        return sum(_layer_flags(model_cfg, fresh))
    hp = resolve(model_cfg).hp
    return int(hp["layers"]) * (2 if hp.get("split_layers") else 1)  # split: attention and feed-forward blocks


def zoo_ends(model_cfg: ModelNode) -> tuple:
    """(has blocks before its first layer block, has blocks after its last) of the configured model: from a table
    for zoo models, from the blocks of a custom or Transformers model built on the meta device."""
    if str(getattr(model_cfg, "name", "")) in (CUSTOM, HF):
        flags = _layer_flags(model_cfg)
        if True not in flags:
            return (True, False)
        return (not flags[0], not flags[-1])
    return _ENDS[resolve(model_cfg).family]



_FLAGS: Dict[str, Tuple[bool, ...]] = {}
"""``is_layer`` of each block, by model configuration: building a Transformers model on the meta device costs tens
of milliseconds, and the rule table asks for its layers and ends on every configuration it checks (a sweep, a
plan's thousands of candidates) while the model stays the same."""


def _layer_flags(model_cfg: ModelNode, fresh: bool = False) -> Tuple[bool, ...]:
    """``is_layer`` of each block of a custom or Transformers model, built once per configuration (and kept on disk,
``models.flags_cache``, so a later process with a warm capture cache imports neither torch nor Transformers)."""
    key = _model_key(model_cfg)
    flags = None if fresh else _FLAGS.get(key)
    if flags is None:
        from ipuexp.models.flags_cache import layer_flags

        def build() -> Tuple[bool, ...]:
            import torch

            with torch.device("meta"):
                return tuple(b.is_layer for b in build_model(model_cfg).blocks)

        name = str(getattr(model_cfg, "name", ""))
        target = str(getattr(model_cfg, "target", "") or "") if name == CUSTOM else None
        flags = _FLAGS[key] = layer_flags(key, target, name == HF, build, fresh)
    return flags


def _model_key(model_cfg: ModelNode) -> str:
    """The model configuration's content (a Transformers model's also its config.json, after overrides)."""
    import dataclasses
    import json

    from omegaconf import DictConfig, OmegaConf

    if isinstance(model_cfg, DictConfig):
        plain = OmegaConf.to_container(model_cfg, resolve=True)
    elif dataclasses.is_dataclass(model_cfg):
        plain = dataclasses.asdict(model_cfg)
    else:
        plain = vars(model_cfg)
    if str(getattr(model_cfg, "name", "")) == HF:
        from ipuexp.models.hf_source import fingerprint

        plain = {"model": plain, "hf": fingerprint(model_cfg)}
    return json.dumps(plain, sort_keys=True, default=str)
