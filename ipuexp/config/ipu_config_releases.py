"""``IPUConfig``'s defaults by Optimum Graphcore release: what a field an ``ipu_config.json`` leaves out becomes.

Four of the fields ipuexp models changed their default between releases (``IPUConfig.__init__`` in
``optimum/graphcore/ipu_configuration.py`` of huggingface/optimum-graphcore, at each release's tag), so a file that
relies on a default runs differently under different releases. ``model.hf.optimum_graphcore`` names the release;
unset, the first release's defaults apply and the fields whose default a later release changed are named.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

from packaging.version import InvalidVersion, Version

from ipuexp.config.errors import ConfigError

KEY = "model.hf.optimum_graphcore"

FIRST_DEFAULTS: Dict[str, Any] = {
    "replication_factor": 1,
    "gradient_accumulation_steps": 1,
    "device_iterations": 1,
    "inference_device_iterations": 1,
    "optimizer_state_offchip": True,
    "replicated_tensor_sharding": False,
    "matmul_proportion": 0.6,
    "enable_half_first_order_momentum": False,
    "enable_half_partials": False,
    "embedding_serialization_factor": 1,
    "recompute_checkpoint_every_layer": False,
    "output_mode": "final",
    "auto_loss_scaling": False,
}
"""``IPUConfig``'s defaults from v0.1.0 (November 2021) to v0.4.2 (November 2022) for the fields ipuexp models."""

CHANGES: Tuple[Tuple[str, Dict[str, Any], str], ...] = (
    ("0.4.3", {"enable_half_partials": True}, "3edc110e, 'Set enable half partials by default to True'"),
    ("0.6.0", {"matmul_proportion": 0.2, "recompute_checkpoint_every_layer": True}, "v0.6.0's IPUConfig"),
    ("0.6.1", {"optimizer_state_offchip": False, "recompute_checkpoint_every_layer": False},
     "89b90a7b, 'Add attribute type validation to IPUConfig': keyword defaults"),
)
"""Each release that changed a default, the new defaults from it on, and the change (commit or tag)."""

FIRST, LAST = "0.1.0", "0.7.1"
"""The releases of Optimum Graphcore (v0.7.1, July 2023, is its last)."""


def parse(release: Any, key: str = KEY) -> Optional[Version]:
    """``model.hf.optimum_graphcore`` (or the option ``key``) as a version (None when unset); one-line refusal
    otherwise."""
    if release is None or release == "":
        return None
    allowed = f"allowed: an Optimum Graphcore release from {FIRST} to {LAST} (e.g. {LAST}), or null"
    try:
        version = Version(str(release).strip())
    except InvalidVersion:
        raise ConfigError(key, release, allowed) from None
    if not Version(FIRST) <= version <= Version(LAST):
        raise ConfigError(key, release, allowed)
    return version


def defaults(release: Any = None) -> Dict[str, Any]:
    """``IPUConfig``'s defaults in ``release`` (unset: the first release's)."""
    version = parse(release)
    out = dict(FIRST_DEFAULTS)
    if version is not None:
        for since, changed, _ in CHANGES:
            if version >= Version(since):
                out.update(changed)
    return out


def left_out_that_changed(given: Dict[str, Any], release: Any) -> List[str]:
    """With no release named, the fields ``given`` leaves out whose default a later release changed, each with its
    defaults (``enable_half_partials false (true from 0.4.3)``); nothing when a release is named."""
    if parse(release) is not None:
        return []
    said = []
    for field_name, first in FIRST_DEFAULTS.items():
        if field_name in given:
            continue
        later = [(since, changed[field_name]) for since, changed, _ in CHANGES if field_name in changed]
        if later:
            said.append(f"{field_name} {json.dumps(first)} ("
                        + ", ".join(f"{json.dumps(v)} from {s}" for s, v in later) + ")")
    return said


def defaults_line(path: Any, fields: Dict[str, Any], release: Any, hint: str = f"{KEY}={LAST}") -> Optional[str]:
    """The warning for a file read with no release named that leaves out such fields, in one line (``hint``: how
    to name the release)."""
    changed = left_out_that_changed(dict(fields), release)
    if not changed:
        return None
    return (f"{path}: leaves out fields whose IPUConfig default later Optimum Graphcore releases changed; the first "
            f"release's apply: {'; '.join(changed)} (name the release it runs under: {hint})")
