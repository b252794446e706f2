"""What a run is: its config hash and its descriptive tags (its parameters: :mod:`ipuexp.tracking.curated`)."""
from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

from omegaconf import DictConfig, OmegaConf

MAX_TAG_VALUE = 8000
"""MLflow's ``MAX_TAG_VAL_LENGTH``."""
HASH_EXCLUDED = ("tracking", "runner", "hydra")
"""Top-level keys that say where and how a job is recorded or scheduled, not what it computes."""
HASH_EXCLUDED_PATHS = (("engine", "cache_dir"),)
"""Nested keys with the same property: where graph captures are cached changes no figure."""


def resolved(cfg: Union[DictConfig, Mapping[str, Any]]) -> Dict[str, Any]:
    """The config as plain containers, interpolations resolved and enums as their names (a dict passes as is)."""
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)  # type: ignore[return-value]
    return dict(cfg)


def config_hash(cfg: Union[DictConfig, Mapping[str, Any]]) -> str:
    """A stable short sha256 of what the job computes: the resolved config minus tracking, runner and hydra."""
    data = {k: v for k, v in resolved(cfg).items() if k not in HASH_EXCLUDED}
    for path in HASH_EXCLUDED_PATHS:
        data = _without(data, path)
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _without(data: Dict[str, Any], path: tuple) -> Dict[str, Any]:
    """``data`` less the key at ``path``, copying only the dicts on the way (the caller's config is left whole)."""
    if not isinstance(data, dict) or path[0] not in data:
        return data
    out = dict(data)
    if len(path) == 1:
        del out[path[0]]
    else:
        out[path[0]] = _without(data[path[0]], path[1:])
    return out


@functools.lru_cache(maxsize=None)
def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ipuexp")
    except PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=None)
def git_commit() -> Optional[str]:
    """Commit of the checkout holding the ipuexp package, when it is one (MLflow's own git helper)."""
    from mlflow.utils.git_utils import get_git_commit

    return get_git_commit(str(Path(__file__).resolve().parents[1]))


def job_tags(cfg: Union[DictConfig, Mapping[str, Any]], hashed: Optional[str] = None) -> Dict[str, str]:
    """Descriptive tags of a job run (besides MLflow's user/source tags); ``hashed``: its config hash, when known."""
    data = resolved(cfg)
    tags = {
        "ipu": str(data["ipu"]["name"]),
        "system": str(data["system"]["name"]),
        "model": f"{data['model']['name']}_{data['model']['size']}",
        "engine_mode": str(data["engine"]["mode"]),
        "config_hash": hashed or config_hash(data),
        "ipuexp_version": package_version(),
    }
    if data.get("recipe"):
        tags["recipe"] = str(data["recipe"])
    from ipuexp.calibration.user import tag_of

    tags.update(tag_of(data.get("calibration"), data["ipu"].get("calibration") or {}))
    commit = git_commit()
    if commit:
        tags["git_commit"] = commit
        tags["mlflow.source.git.commit"] = commit
    return tags


def chunks(items: List[Any], size: int) -> List[List[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def clip_tag(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_TAG_VALUE else text[:MAX_TAG_VALUE - 3] + "..."
