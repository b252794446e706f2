"""Throughput of a configuration: stage costs -> pipeline simulation -> weight update -> samples per second.

``estimate_throughput(plan, graph)`` is the public entry; ``step_events`` returns the per-IPU intervals
of one step (one weight update) for the trace and the Gantt chart (``step_rows``: the same as columns). Both run the
same model.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from math import ceil
from typing import Dict, List, Optional, Tuple

from ipuexp.emulator.collectives import LinkRates, allreduce_s, sharded_update_collectives_s, streaming_s
from ipuexp.emulator.host import host_call_s, host_io
from ipuexp.emulator.cost import Cycles, blocks_cycles, vector_cycles
from ipuexp.emulator.events import Event, EventRows
from ipuexp.emulator.pipeline import PipelineResult, PipelineSpec, StageWork, simulate, simulate_rows
from ipuexp.emulator.stash import stage_stash
from ipuexp.emulator.weight_update import weight_update_s
from ipuexp.graph.types import BlockKey, Graph, Stage
from ipuexp.execution.execution import ExecutionPlan
from ipuexp.execution.hardware import TileContext
from ipuexp.execution.precision import float_elements, tensor_bytes
from ipuexp.result import ThroughputFigures


@dataclass
class IPUStep:
    """Seconds one IPU of a replica spends per step, by what it does."""

    ipu: int
    pipeline: Dict[str, float]
    weight_update: float = 0.0
    all_reduce: float = 0.0
    host_call: float = 0.0


@dataclass
class StepAnalysis:
    step_time_s: float
    samples_per_step: float
    pipeline: PipelineResult
    ipus: List[IPUStep]
    flops_per_sample: float
    peak_flops: float
    share: float = 1.0
    """Share of the simulated time that makes one step (inference simulates a host call of device_iterations
    steps at once)."""
    events: List[Event] = field(default_factory=list)
    sequences_per_sample: Optional[float] = None
    """Packed sequences: ``data.packing.avg_sequences_per_pack`` (a sample is a pack); None when not packed."""
    rows: Optional[EventRows] = None
    """The step's events as columns, when asked for (``event_rows``)."""
    one_at_a_time: bool = False
    """Sharded execution (the sequential schedule) over more than one IPU: one IPU works at a time; the host call
    keeps the first IPU (which takes the inputs) busy while the others wait for their turn."""



def _stage_works(plan: ExecutionPlan, ctxs: Dict[int, TileContext]) -> Tuple[StageWork, ...]:
    """Every stage's seconds per micro-batch, looked up an IPU at a time (a planner meets each IPU's stages under
    each context again and again)."""
    opts, r, pb = plan.options, plan.rates, plan.precision
    locs = opts.tensor_locations
    common = (plan.training, plan.training and opts.gradient_accumulation > 1, locs.accumulators.on_chip,
              locs.weights.on_chip, locs.activations.on_chip, r.clock_hz, r.streaming_memory_bytes_per_s, pb.weight,
              pb.activation)
    by_ipu: Dict[int, List[Stage]] = {}
    for st in plan.stages:
        by_ipu.setdefault(st.ipu, []).append(st)
    works: Dict[int, StageWork] = {}
    for ipu, own in by_ipu.items():
        got = _ipu_works(tuple((st.key, st.index, plan.stage_recomputes[st.index]) for st in own), ipu, ctxs[ipu],
                         *common)
        works.update(zip((st.index for st in own), got))
    return tuple(works[st.index] for st in plan.stages)


@lru_cache(maxsize=8192)
def _ipu_works(stages: Tuple[Tuple[Tuple[BlockKey, ...], int, bool], ...], ipu: int, ctx: TileContext,
               *common: object) -> Tuple[StageWork, ...]:
    return tuple(_work(keys, index, ipu, ctx, *common, recompute) for keys, index, recompute in stages)


def _work(keys: Tuple[BlockKey, ...], index: int, ipu: int, ctx: TileContext, training: bool, accumulating: bool,
          accumulators_on_chip: bool, weights_on_chip: bool, activations_on_chip: bool, clock: float,
          streaming: float, weight: int, act: int, recompute: bool) -> StageWork:
    """A stage's seconds per micro-batch."""
    blocks = [k.block for k in keys]
    bc = blocks_cycles(blocks, ctx)
    fwd, bwd = bc.fwd, Cycles(bc.bwd.compute, bc.bwd.exchange) if training else Cycles()
    params = sum(b.parameters for b in blocks)
    extra_fwd = extra_bwd = 0.0
    if accumulating:
        # Accumulate this micro-batch's gradients: read accumulator and gradient, write accumulator.
        bwd += vector_cycles(3.0 * params * weight, ctx, supersteps=1)
        if not accumulators_on_chip:
            extra_bwd += streaming_s(2.0 * params * weight, streaming)
    if not weights_on_chip:
        # Off-chip weights are streamed in for the forward and again for the backward pass.
        extra_fwd += streaming_s(params * weight, streaming)
        if training:
            extra_bwd += streaming_s(params * weight, streaming)
    inputs, outputs = blocks[0].inputs, blocks[-1].outputs
    if training and not activations_on_chip:
        stash = (tensor_bytes(inputs, act) if recompute else stage_stash(blocks, 1, False, False, act).entry_bytes)
        extra_fwd += streaming_s(stash, streaming)
        extra_bwd += streaming_s(stash, streaming)
    return StageWork(
        stage=index,
        ipu=ipu,
        fwd_compute=fwd.compute / clock,
        fwd_exchange=fwd.exchange / clock + extra_fwd,
        bwd_compute=bwd.compute / clock,
        bwd_exchange=bwd.exchange / clock + extra_bwd,
        recompute=fwd.total / clock if recompute else 0.0,
        send_fwd_bytes=float(tensor_bytes(outputs, act)),
        send_bwd_bytes=float(float_elements(inputs) * act) if training else 0.0,
    )


def link_rates(plan: ExecutionPlan) -> LinkRates:
    """The links of a ring of replicas: bandwidth, and the fixed cost of one step inside a rack (the step's
    supersteps, the cross-replica sync and its hops there and back) and across racks (fitted)."""
    r = plan.rates
    cal = r.calibration
    superstep = (float(plan.ipu.sync_cycles) + cal.compute_set_cycles) / r.clock_hz
    step = (cal.ring_step_supersteps * superstep + cal.global_sync_cycles / r.clock_hz
            + 2 * r.ring_hops * cal.hop_latency_s)
    rings_per_machine = max(1, min(len(plan.ipus), r.ipus_per_machine))
    return LinkRates(ring_bytes_per_s=r.ring_bytes_per_s, gw_bytes_per_s=r.gw_link_bytes_per_s / rings_per_machine,
                     step_latency_s=step, gw_step_latency_s=cal.gw_step_latency_s)


def _collective_s(plan: ExecutionPlan, params: int) -> float:
    opts = plan.options
    replicas = int(opts.replication_factor)
    if replicas <= 1 or params == 0:
        return 0.0
    pb = plan.precision
    links = link_rates(plan)
    racks = racks_spanned(plan)
    grad_bytes = params * pb.weight
    if opts.tensor_locations.optimizer_state.replicated_tensor_sharding:
        return sharded_update_collectives_s(grad_bytes, params * pb.weight, replicas, racks, links)
    return allreduce_s(grad_bytes, replicas, racks, links)


def racks_spanned(plan: ExecutionPlan) -> int:
    """Racks the replicas occupy (64 IPUs a rack, replicas packed in order)."""
    r = plan.rates
    ipus = len(plan.ipus) * int(plan.options.replication_factor)
    per_rack = max(1, int(plan.system.num_ipus) // r.num_racks)
    return max(1, min(r.num_racks, ceil(ipus / per_rack)))


def analyse(plan: ExecutionPlan, graph: Graph, record_events: bool = False,
            block_memo: Optional[Dict[TileContext, Dict]] = None, event_rows: bool = False) -> StepAnalysis:
    """Time one step of ``plan`` (a weight update in training; one device iteration in inference), with its events
    as objects (``record_events``) or as columns (``event_rows``), from a simulation cycle by cycle.

    ``block_memo`` is accepted and unused: blocks' cycles are shared through ``cost``'s bounded caches (a block's
    cycles depend only on the block and its IPU's context)."""
    opts, r, stages = plan.options, plan.rates, plan.stages
    ipu_ids = plan.ipus
    ctxs = dict(zip(ipu_ids, plan.contexts))
    works = _stage_works(plan, ctxs)
    io = host_io(plan, graph, ctxs[stages[0].ipu])
    ga = int(opts.gradient_accumulation)
    di = int(opts.device_iterations)
    spec = PipelineSpec(
        stages=works,
        schedule=plan.schedule if plan.num_stages > 1 else "grouped",
        micro_batches=plan.micro_batches,
        training=bool(plan.training),
        link_bytes_per_s=r.neighbour_link_bytes_per_s,
        sync_s=r.calibration.global_sync_cycles / r.clock_hz,
        io_s=io["io_s"],
        io_overlap=io["io_overlap"],
        io_exposed_s=io["io_exposed_s"],
        host_period_s=io["host_period_s"],
    )
    pipe = simulate_rows(spec) if record_events or event_rows else simulate(spec)
    # One host call runs device_iterations steps; its cost is shared by them.
    steps_per_call = di if plan.training else 1
    host_call = host_call_s(plan) / steps_per_call
    ipus: List[IPUStep] = []
    for i in ipu_ids:
        own = [s for s in stages if s.ipu == i]
        params = sum(s.parameters for s in own)
        tensors = sum(b.parameter_tensors for s in own for b in s.blocks)
        wu = weight_update_s(plan, params, tensors, ctxs[i]) if plan.training else 0.0
        ar = _collective_s(plan, params) if plan.training else 0.0
        ipus.append(IPUStep(i, pipe.busy[i], wu, ar, host_call))
    update = max(x.weight_update + x.all_reduce for x in ipus)
    share = 1.0 if plan.training else 1.0 / di
    step = (host_call + pipe.time_s + update) * share
    samples = plan.micro_batch_size * ga * opts.replication_factor
    mbs = graph.micro_batch_size
    flops = (graph.fwd_flops + (graph.bwd_flops if plan.training else 0)) / mbs
    peak = r.peak_flops_per_ipu * len(ipu_ids) * opts.replication_factor
    rows = _step_rows(pipe.rows, ipus, pipe.time_s, host_call) if pipe.rows is not None else None
    events = rows.events() if record_events and rows is not None else []
    packing = plan.data.packing
    per_pack = float(packing.avg_sequences_per_pack) if packing.max_sequences_per_pack > 1 else None
    one_at_a_time = spec.schedule == "sequential" and len(set(ipu_ids)) > 1
    return StepAnalysis(step, samples, pipe, ipus, flops, peak, share, events, per_pack, rows, one_at_a_time)


def _step_rows(pipeline: EventRows, ipus: List[IPUStep], pipe_s: float, host_call: float) -> EventRows:
    """The host call's synchronisation, then the pipeline (each start moved by the host call), then each IPU's
    all-reduce and weight update."""
    out = EventRows()
    if host_call > 0:
        part = out.add_part("host call", "", "host_io", False)
        for x in ipus:
            out.add(x.ipu, part, 0.0, host_call)
    out.extend(pipeline, shift=host_call)
    all_reduce = out.add_part("gradient all-reduce", "", "all_reduce", False)
    update = out.add_part("weight update", "", "weight_update", False)
    for x in ipus:
        t = host_call + pipe_s
        if x.all_reduce > 0:
            out.add(x.ipu, all_reduce, t, x.all_reduce)
            t += x.all_reduce
        if x.weight_update > 0:
            out.add(x.ipu, update, t, x.weight_update)
    return out


def figures(a: StepAnalysis) -> ThroughputFigures:
    step = a.step_time_s
    keys = ("compute", "recompute", "exchange", "host_io", "weight_update", "all_reduce", "idle")
    per_ipu = []
    utilisation, bubbles = [], []
    k = a.share
    for x in a.ipus:
        b = dict.fromkeys(keys, 0.0)
        for cat in ("compute", "recompute", "exchange"):
            b[cat] = x.pipeline.get(cat, 0.0) * k
        host_call = x.host_call if not a.one_at_a_time or x is a.ipus[0] else 0.0
        b["host_io"] = (x.pipeline.get("host_io", 0.0) + host_call) * k
        b["weight_update"] = x.weight_update * k
        b["all_reduce"] = x.all_reduce * k
        b["idle"] = max(0.0, step - sum(b.values()))
        per_ipu.append(b)
        # Busy: computing or exchanging, not idle and not waiting for the host (a host call, input and output
        # streams: the chart's host IO). Bubble: waiting inside the pipeline phase (ramps, imbalance, input).
        utilisation.append(1.0 - (b["idle"] + b["host_io"]) / step if step else 0.0)
        bubbles.append(max(0.0, a.pipeline.time_s - sum(x.pipeline.values())) * k / step if step else 0.0)
    n = len(per_ipu)
    breakdown = {k: sum(b[k] for b in per_ipu) / n for k in keys}
    sps = a.samples_per_step / step if step else 0.0
    bound = a.peak_flops / a.flops_per_sample if a.flops_per_sample else float("inf")
    return ThroughputFigures(samples_per_s=sps, step_time_s=step, bubble_fraction=sum(bubbles) / n,
                             utilisation=utilisation, breakdown=breakdown, peak_flops_bound_samples_per_s=bound,
                             sequences_per_s=None if a.sequences_per_sample is None else sps * a.sequences_per_sample)


def estimate_throughput(plan: ExecutionPlan, graph: Graph,
                        block_memo: Optional[Dict[TileContext, Dict]] = None) -> ThroughputFigures:
    """Samples per second, step time, utilisation, bubble and time breakdown of one configuration (the error band
    is the job's to add: ``ipuexp.runner.evaluation.evaluate``, from the calibration's residuals). ``block_memo``: see
    ``analyse``."""
    return figures(analyse(plan, graph, block_memo=block_memo))


def step_events(plan: ExecutionPlan, graph: Graph) -> List[Event]:
    """Per-IPU intervals of one step, simulated cycle by cycle (for ``report.trace`` and ``report.gantt``)."""
    return analyse(plan, graph, record_events=True).events


def step_rows(plan: ExecutionPlan, graph: Graph) -> EventRows:
    """``step_events`` as columns (what the trace and the Gantt chart read, without an object per event)."""
    return analyse(plan, graph, event_rows=True).rows
