"""Pipeline shape from the options alone: the IPU of each stage, IPUs per replica, PopTorch's forward stages.

Validation and stage assignment (``ipuexp.graph.stages``) both use these, so the rule is written once.
"""
from __future__ import annotations

from typing import List, Optional, Sequence


def stage_mapping(layers_per_ipu: Sequence[int], device_mapping: Optional[Sequence[int]]) -> List[int]:
    """IPU of each stage."""
    n = max(len(layers_per_ipu), 1)
    if device_mapping:
        return list(device_mapping)
    return list(range(n))


def ipus_per_replica(layers_per_ipu: Sequence[int], device_mapping: Optional[Sequence[int]]) -> int:
    return len(set(stage_mapping(layers_per_ipu, device_mapping)))


def forward_stages(layers_per_ipu: Sequence[int], device_mapping: Optional[Sequence[int]]) -> int:
    """F in PopTorch's rule: IPU switches along the block sequence + 1."""
    mapping = stage_mapping(layers_per_ipu, device_mapping)
    return 1 + sum(1 for a, b in zip(mapping, mapping[1:]) if a != b)
