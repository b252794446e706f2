"""The execution plan of a functional run: plain data derived once from the configuration and the model."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Sequence, Tuple

from ipuexp.config.schema import ExperimentConfig
from ipuexp.training.batching import BatchLayout
from ipuexp.training.precision import PrecisionPolicy

OUTPUT_MODES = ("default", "final", "all", "sum")
REDUCTIONS = ("mean", "sum")
RECOMPUTATION = ("none", "pipeline", "all")


@dataclass(frozen=True)
class TrainingPlan:
    """How one instance executes: batching, stages, schedule, recomputation, precision and outputs."""

    layout: BatchLayout
    """Micro-batch, accumulation, device iterations, replicas and instances."""
    stages: Tuple[Tuple[int, ...], ...]
    """Indices of the model's blocks in each pipeline stage."""
    schedule: str
    """grouped, interleaved or sequential."""
    checkpoint_blocks: Tuple[int, ...] = ()
    """Blocks whose forward is recomputed in the backward pass from their inputs (activation checkpoints)."""
    checkpoint_stages: bool = False
    """Recompute each stage's forward from its stashed inputs (PopART ``RecomputationType::Pipeline``)."""
    output_mode: str = "final"
    """What a training host call returns: final, all or sum (default resolved: final for training)."""
    reduction: str = "mean"
    """Gradient reduction over micro-batches and replicas: mean or sum."""
    precision: PrecisionPolicy = PrecisionPolicy(False, False, False)
    """Number formats."""
    loss_scaling: float = 1.0
    """Initial (static) loss scale."""
    auto_loss_scaling: bool = False
    """Adapt the loss scale each update (fp16 compute only)."""
    seed: int = 42
    """Random seed: weights, shuffling, dropout and stochastic rounding."""

    @property
    def num_stages(self) -> int:
        return len(self.stages)


def _value(x: Any) -> str:
    return str(getattr(x, "value", x))


def stage_blocks(blocks: Sequence[Any], layers_per_ipu: Sequence[int], device_mapping: Any,
                 merge: bool = False) -> List[List[int]]:
    """Block indices per stage, by the same rule as the analytic engine (``ipuexp.graph.stages.assign_stages``,
    which reads only ``is_layer`` from each block)."""
    from ipuexp.graph.stages import assign_stages

    # Validated with the config against the model's layers; invariants here.
    assert not layers_per_ipu or sum(layers_per_ipu) == sum(1 for b in blocks if b.is_layer), layers_per_ipu
    assert not (device_mapping and layers_per_ipu) or len(device_mapping) in (len(layers_per_ipu),
                                                                             len(layers_per_ipu) + 1), device_mapping
    position = {id(b): i for i, b in enumerate(blocks)}
    stages = assign_stages(list(blocks), list(layers_per_ipu), list(device_mapping) if device_mapping else None,
                           merge=merge)
    return [[position[id(b)] for b in s.blocks] for s in stages if s.blocks]


def make_plan(exp: ExperimentConfig, blocks: Sequence[Any]) -> TrainingPlan:
    """The plan for an ``ExperimentConfig`` and the model's blocks."""
    o = exp.options
    schedule = _value(o.pipeline.schedule)
    output_mode, reduction = _value(o.output_mode), _value(o.reduction_type)
    recompute = _value(o.recomputation.mode)
    # Validated with the config (one rule table: ipuexp.config.validate); invariants here.
    assert output_mode in OUTPUT_MODES and reduction in REDUCTIONS and recompute in RECOMPUTATION, o
    layout = BatchLayout(int(exp.data.micro_batch_size), int(o.gradient_accumulation), int(o.device_iterations),
                         int(o.replication_factor), int(o.num_instances))
    from ipuexp.graph.stages import merges_stages

    stages = stage_blocks(blocks, list(o.pipeline.layers_per_ipu or []), o.pipeline.device_mapping,
                          merge=merges_stages(exp.host.framework))
    # Recomputation: "all" checkpoints every block; "pipeline" recomputes each stage from its stashed inputs when
    # the model is pipelined (PopTorch enables it only with more than one IPU: poptorch.Options, PopTorch user guide),
    # and recomputationCheckpoint at every layer output (checkpoint_every_layer) splits that further.
    checkpoint_blocks: Tuple[int, ...] = ()
    checkpoint_stages = False
    if recompute == "all":
        checkpoint_blocks = tuple(range(len(blocks)))
    elif recompute == "pipeline":
        if o.recomputation.checkpoint_every_layer:
            checkpoint_blocks = tuple(i for i, b in enumerate(blocks) if b.is_layer)
        else:
            checkpoint_stages = len(stages) > 1
    return TrainingPlan(
        layout=layout,
        stages=tuple(tuple(s) for s in stages),
        schedule=schedule,
        checkpoint_blocks=checkpoint_blocks,
        checkpoint_stages=checkpoint_stages,
        output_mode="final" if output_mode == "default" else output_mode,
        reduction=reduction,
        precision=PrecisionPolicy.from_options(str(o.precision), bool(o.stochastic_rounding)),
        loss_scaling=float(o.loss_scaling),
        auto_loss_scaling=bool(o.auto_loss_scaling),
        seed=int(o.random_seed),
    )
