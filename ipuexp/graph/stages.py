"""Place captured blocks into pipeline stages and stages onto IPUs.

The rule is Graphcore's model-placement convention (BERT ``modeling.py``, GPT-2, ViT): ``layers_per_ipu[i]``
layers go to stage i; blocks before the first layer (embeddings) join stage 0; blocks after the last layer
(heads) join the last stage, or form a stage of their own when ``device_mapping`` has one entry more than
``layers_per_ipu`` (BERT's heads back on IPU 0: ``[0, 1, 2, 3, 0]``).
"""
from __future__ import annotations

from typing import List, Optional, Sequence

from ipuexp.config.pipeline import stage_mapping
from ipuexp.graph.types import BlockCapture, Stage


def assign_stages(
    blocks: Sequence[BlockCapture],
    layers_per_ipu: Sequence[int],
    device_mapping: Optional[Sequence[int]] = None,
    auto_increment: bool = False,
) -> List[Stage]:
    """Split ``blocks`` into stages; the caller has validated that the layer counts add up. ``auto_increment``:
    PopTorch's ``AutoStage.AutoIncrement``, every block a stage of its own on the IPU its group has."""
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
    if auto_increment:
        # PopTorch (enums.py, AutoStage): "AutoIncrement: the stage is incremented for every new Block", so each
        # BeginBlock (here a captured block) starts a stage; the IPU stays the one its group was placed on.
        placed = [(mapping[i], [b]) for i, g in enumerate(groups) for b in g]
        return [Stage(index=i, ipu=ipu, blocks=g) for i, (ipu, g) in enumerate(placed)]
    return [Stage(index=i, ipu=mapping[i], blocks=g) for i, g in enumerate(groups)]
