"""Per-IPU model figures: parameters, FLOPs, saved activations and boundary traffic per micro-batch."""
from __future__ import annotations

from typing import Dict, List, Sequence

from ipuexp.emulator.stash import stage_stash
from ipuexp.graph.types import Graph, Stage
from ipuexp.execution.precision import precision_bytes, tensor_bytes
from ipuexp.result import IPUModelFigures, ModelFigures


def model_figures(graph: Graph, stages: Sequence[Stage], precision: str, training: bool) -> ModelFigures:
    act = precision_bytes(precision).activation
    per_ipu: Dict[int, List[Stage]] = {}
    for stage in stages:
        per_ipu.setdefault(stage.ipu, []).append(stage)
    ipus = []
    for ipu in sorted(per_ipu):
        own = per_ipu[ipu]
        blocks = [b for s in own for b in s.blocks]
        ipus.append(IPUModelFigures(
            ipu=ipu,
            stages=[s.index for s in own],
            blocks=[b.name for b in blocks],
            parameters=sum(b.parameters for b in blocks),
            fwd_flops=sum(b.fwd_flops for b in blocks),
            bwd_flops=sum(b.bwd_flops for b in blocks) if training else 0,
            # What the stage's blocks save for backward, tensors shared by consecutive blocks counted once.
            saved_activation_bytes=sum(stage_stash(s.blocks, 1, False, False, act).entry_bytes for s in own),
            boundary_out_bytes=sum(tensor_bytes(s.outputs, act) for s in own if s.index < len(stages) - 1),
        ))
    mbs = graph.micro_batch_size
    fwd = graph.fwd_flops / mbs
    bwd = graph.bwd_flops / mbs if training else 0.0
    return ModelFigures(
        name=graph.model,
        parameters=graph.parameters,
        flops_per_sample=fwd + bwd,
        fwd_flops_per_sample=fwd,
        bwd_flops_per_sample=bwd,
        num_stages=len(stages),
        ipus_per_replica=len(per_ipu),
        capture_seconds=graph.capture_seconds,
        ipus=ipus,
    )
