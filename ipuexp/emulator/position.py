"""Where a configuration sits along the axes that move the model's error (``calibration.reach``): the error band
of its prediction grows with its distance from the calibration rows there."""
from __future__ import annotations

from typing import Any, Optional

from ipuexp.calibration import family
from ipuexp.calibration.evidence import Point
from ipuexp.config.schema import option_value
from ipuexp.execution.execution import ExecutionPlan
from ipuexp.result import MemoryFigures

IMAGE_FAMILIES = ("resnet", "vit", "mnist")


def elements_per_micro_batch(model: Any, graph_model: str, micro_batch: int) -> tuple:
    """(tokens or pixels per micro-batch, "tokens" or "pixels"): what every operation of a step scales with."""
    task = str(getattr(getattr(model, "hf", None), "task", "") or "")
    if family(graph_model) in IMAGE_FAMILIES or "image" in task:
        side = int(getattr(model, "image_size", 0) or 0)
        return float(side * side * micro_batch), "pixels"
    return float(int(getattr(model, "sequence_length", 0) or 0) * micro_batch), "tokens"


def point_of(model: Any, graph_model: str, plan: ExecutionPlan, memory: Optional[MemoryFigures]) -> Point:
    """The ``Point`` of a configuration: its model node (``exp.model``), the captured model's name, its plan and,
    when known, its memory figures (the fullest tile's headroom)."""
    elements, kind = elements_per_micro_batch(model, graph_model, plan.micro_batch_size)
    headroom = None
    if memory is not None and memory.ipus:
        tile_memory = float(plan.ipu.memory_per_tile_bytes)
        headroom = 1.0 - max(m.max_tile_bytes for m in memory.ipus) / tile_memory
    ipr = len(plan.ipus)
    samples = float(plan.micro_batch_size * int(plan.options.gradient_accumulation) * plan.replicas)
    return Point(ipus_per_replica=ipr, elements=elements, elements_kind=kind, samples_per_step=samples,
                 tile_headroom=headroom, system_ipus=ipr * plan.replicas,
                 framework=option_value(plan.host.framework))
