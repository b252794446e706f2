"""Place captured blocks into pipeline stages and stages onto IPUs.

The rule is Graphcore's model-placement convention (BERT ``modeling.py``, GPT-2, ViT): ``layers_per_ipu[i]``
layers go to stage i; blocks before the first layer (embeddings) join stage 0; blocks after the last layer
(heads) join the last stage, or form a stage of their own when ``device_mapping`` has one entry more than
``layers_per_ipu`` (BERT's heads back on IPU 0: ``[0, 1, 2, 3, 0]``).

Under PopART (PopTorch, Optimum Graphcore, PopART sessions) consecutive stages on one IPU are one stage: PopART
merges them when it pipelines the graph (``pipeline.cpp``, ``mergeConsecutivePipelineStages``; PopTorch user guide,
"Pipelined execution": "If two consecutive blocks/stages use the same IPU, PopTorch will merge them into a single
block/stage", and for sharded execution alike). So PopTorch's ``AutoStage.AutoIncrement``, which gives every block
a stage of its own (Optimum Graphcore, Graphcore's BERT and GPT-2 applications), runs one stage per visit of an
IPU, as ``SameAsIpu`` does. TensorFlow's pipelining keeps its stages (its sequential schedule on one IPU recomputes
stage by stage).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

from ipuexp.config.options import option_value
from ipuexp.config.pipeline import stage_mapping
from ipuexp.graph.types import BlockCapture, Stage

MERGING_FRAMEWORKS = ("poptorch", "optimum", "popart")
"""``host.framework`` values whose graphs PopART pipelines, merging consecutive stages on one IPU."""


def merges_stages(framework: Any) -> bool:
    """Whether the training loop of ``host.framework`` runs its graph through PopART (``MERGING_FRAMEWORKS``)."""
    return option_value(framework) in MERGING_FRAMEWORKS


def assign_stages(
    blocks: Sequence[BlockCapture],
    layers_per_ipu: Sequence[int],
    device_mapping: Optional[Sequence[int]] = None,
    merge: bool = False,
) -> List[Stage]:
    """Split ``blocks`` into stages; the caller has validated that the layer counts add up. ``merge``: consecutive
    stages on one IPU become one (PopART: ``framework in MERGING_FRAMEWORKS``)."""
    mapping = stage_mapping(layers_per_ipu, device_mapping)
    if not layers_per_ipu:
        return [Stage(index=0, ipu=mapping[0], blocks=list(blocks))]
    head_stage = len(mapping) > len(layers_per_ipu)
    last_layer_stage = len(layers_per_ipu) - 1
    # Stage boundaries in layer counts: layer j belongs to the first stage whose cumulative count exceeds j.
    bounds, total = [], 0
    for count in layers_per_ipu:
        total += count
        bounds.append(total)
    groups: List[List[BlockCapture]] = [[] for _ in mapping]
    seen_layers = 0
    current = 0
    for block in blocks:
        if block.is_layer:
            while current < last_layer_stage and seen_layers >= bounds[current]:
                current += 1
            groups[current].append(block)
            seen_layers += 1
        elif seen_layers >= total and seen_layers > 0:
            groups[-1 if head_stage else last_layer_stage].append(block)
        else:
            groups[current].append(block)
    merged: List[List] = []
    for ipu, group in zip(mapping, groups):
        if merge and merged and merged[-1][0] == ipu:
            merged[-1][1].extend(group)
        else:
            merged.append([ipu, list(group)])
    return [Stage(index=i, ipu=ipu, blocks=g) for i, (ipu, g) in enumerate(merged)]
