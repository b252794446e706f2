"""The execution plan: how one replica runs, resolved once from the validated config and the captured graph.

The memory model, the timing model and the reports read the plan, never the experiment config: the stages and
their IPUs, the schedule and each stage's stash depth, whether recomputation is active, precision, the available
memory proportion of each IPU, batching, tensor locations and IO tiles, and the rates of the chosen chip and
system. Changing the hardware model (a chip, a topology, a new term) means changing this builder and the one
consumer that uses the new field.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Mapping, Sequence, Tuple

from ipuexp.config.schema import (
    DataConfig,
    ExperimentConfig,
    HostConfig,
    IPUHardware,
    OptimizerConfig,
    Options,
    SystemConfig,
    option_value,
)
from ipuexp.graph.types import Graph, Stage
from ipuexp.execution.hardware import Rates, TileContext, amp_flops_per_cycle, rates
from ipuexp.execution.precision import PrecisionBytes, partials_bytes, precision_bytes
from ipuexp.execution.schedule import recomputation_active, stage_recomputes, stash_depth


@dataclass(frozen=True)
class ExecutionPlan:
    """One replica's execution, as the emulator models it (immutable: derive a variant with ``replace``)."""

    training: bool
    """Training (forward, backward, weight update) or inference."""
    schedule: str
    """grouped, interleaved or sequential."""
    stages: Tuple[Stage, ...]
    """Pipeline stages of one replica, in order: blocks and IPU."""
    ipus: Tuple[int, ...]
    """IPUs of one replica, ascending."""
    stash_depths: Tuple[int, ...]
    """Micro-batches each stage holds between its forward and backward (``plan.schedule.stash_depth``)."""
    recompute: bool
    """Activations are recomputed in the backward pass (training, and the mode applies to this pipeline)."""
    stage_recomputes: Tuple[bool, ...]
    """Per stage: its forward runs again before its backward (``plan.schedule.stage_recomputes``)."""
    amp: Tuple[float, ...]
    """Available memory proportion of each IPU of ``ipus``, in that order."""
    precision: PrecisionBytes
    """Bytes per element of activations, weights and compute."""
    micro_batch_size: int
    micro_batches: int
    """Micro-batches through the pipeline per step: gradient accumulation (training), or gradient accumulation x
    device iterations (inference)."""
    replicas: int
    options: Options
    """The PopTorch-style options (tensor locations, IO, partials, recomputation checkpoints, ...)."""
    optimizer: OptimizerConfig
    host: HostConfig
    """The host software of the training loop (the cost of a host call)."""
    data: DataConfig
    ipu: IPUHardware
    system: SystemConfig
    rates: Rates
    """Rates of the chip and system in the cost model's units, with the calibration constants."""

    @property
    def num_stages(self) -> int:
        return len(self.stages)

    @functools.cached_property
    def contexts(self) -> Tuple[TileContext, ...]:
        """``tile_context`` of each IPU of ``ipus``, in that order (built once: timing and memory both read them)."""
        return tuple(tile_context(self, p) for p in range(len(self.ipus)))

    def with_calibration(self, constants: Mapping[str, float]) -> "ExecutionPlan":
        """The same plan with some calibration constants replaced (fitting evaluates many of these)."""
        cal = replace(self.rates.calibration, **{k: v for k, v in constants.items()})
        return replace(self, rates=replace(self.rates, calibration=cal))


def tile_context(plan: ExecutionPlan, position: int) -> TileContext:
    """The op cost model's view of the IPU at ``position`` of ``plan.ipus``."""
    opts, r = plan.options, plan.rates
    pb = plan.precision
    half_inputs = pb.compute == 2
    cal = r.calibration
    return TileContext(
        compute_tiles=max(1, r.tiles - r.io_tiles),
        tile_memory_bytes=r.tile_memory_bytes,
        amp_proportion=plan.amp[position],
        flops_per_cycle=amp_flops_per_cycle(plan.ipu, opts.precision, opts.partials_type),
        input_bytes=pb.compute,
        partial_bytes=max(partials_bytes(option_value(opts.partials_type)), pb.compute),
        activation_bytes=pb.activation,
        tile_bytes_per_cycle=r.tile_bytes_per_cycle,
        exchange_bytes_per_cycle=r.exchange_bytes_per_cycle,
        sync_cycles=float(plan.ipu.sync_cycles),
        workers=int(plan.ipu.workers_per_tile),
        amp_efficiency=cal.amp_efficiency,
        vector_efficiency=cal.vector_efficiency,
        compute_set_cycles=cal.compute_set_cycles,
        amp_grain=cal.amp_grain if half_inputs else max(1, cal.amp_grain // 2),
    )


def amp_for_ipu(proportion: object, position: int, num_ipus: int) -> float:
    """``options.available_memory_proportion`` for the IPU at ``position``: one number for all, or one value per
    IPU (validated with the config)."""
    if isinstance(proportion, (int, float)) and not isinstance(proportion, bool):
        return float(proportion)
    values = list(proportion)  # type: ignore[call-overload]
    assert len(values) in (1, num_ipus), (values, num_ipus)
    return float(values[0] if len(values) == 1 else values[position])


def build_plan(exp: ExperimentConfig, stages: Sequence[Stage]) -> ExecutionPlan:
    """The plan of ``exp`` with its graph split into ``stages`` (``graph.stages.assign_stages``)."""
    opts = exp.options
    training = bool(exp.training)
    schedule = option_value(opts.pipeline.schedule)
    n = len(stages)
    ipus = tuple(sorted({st.ipu for st in stages}))
    ga, di = int(opts.gradient_accumulation), int(opts.device_iterations)
    mode = option_value(opts.recomputation.mode)
    # Stash depths count stages to the end (PopART pipeline.cpp: "a stash size of 2*(IPUs to end) + 1"), a stage
    # being one visit of an IPU (``graph.stages``).
    return ExecutionPlan(
        training=training,
        schedule=schedule,
        stages=tuple(stages),
        ipus=ipus,
        stash_depths=tuple(stash_depth(schedule, i, n) for i in range(n)) if training else (0,) * n,
        recompute=training and recomputation_active(mode, n),
        stage_recomputes=tuple(training and stage_recomputes(mode, st.index, n) for st in stages),
        amp=tuple(amp_for_ipu(opts.available_memory_proportion, i, len(ipus)) for i in range(len(ipus))),
        precision=precision_bytes(str(opts.precision)),
        micro_batch_size=int(exp.data.micro_batch_size),
        micro_batches=ga if training else ga * di,
        replicas=int(opts.replication_factor),
        options=opts,
        optimizer=exp.optimizer,
        host=exp.host,
        data=exp.data,
        ipu=exp.ipu,
        system=exp.system,
        rates=rates(exp.ipu, exp.system, int(opts.io.num_io_tiles)),
    )


def plan_for(exp: ExperimentConfig, graph: Graph) -> ExecutionPlan:
    """The plan of ``exp`` for its captured ``graph``, split as its pipeline options say."""
    from ipuexp.graph.stages import assign_stages, merges_stages

    pipe = exp.options.pipeline
    return build_plan(exp, assign_stages(graph.blocks, pipe.layers_per_ipu, pipe.device_mapping,
                                         merge=merges_stages(exp.host.framework)))
