"""IPU memory model: for every IPU of a replica, always-live and not-always-live bytes by category, per tile.

IPU optimisation guide sections 3.2-3.5: an IPU holds variables (weights, gradient accumulators, optimizer
state), code (vertex and control code, internal, host and global exchange code) and data whose liveness varies.
Always-live memory is held for the whole program; not-always-live memory is the peak over the program steps of
what is live at each step (IPU optimisation guide section 3.3, PopVision's liveness report), the steps of one IPU
being its blocks' forward passes, recomputations and backward passes, then the weight update
(``emulator.liveness``).

Categories (result.json ``memory.ipus[i].breakdown``):
always live: weights, gradient_accumulators, optimizer_state, stash (FIFOs of the pipeline, live across the whole
pipeline loop), host_io_buffers (stream buffers of a micro-batch), control_code, internal_exchange_code,
host_exchange_code, global_exchange_code;
not always live (at the IPU's peak step): activations (working set of the step, recomputed activations
included), temporary (matmul/convolution temporaries of the plans the planner picks, ``engine.temporary``),
gradients (weight gradients waiting for the update when there are no accumulators), streamed (tensors loaded
from Streaming Memory or gathered from shards for the step).
A graph of one stage has no pipeline and so no FIFOs (``emulator.stash``): its stash is what the step holds of
the checkpoints (or saved activations) kept from the forward pass for the backward pass, not always live.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ipuexp.emulator.code_size import CodeUnits, code_bytes
from ipuexp.emulator.liveness import LivenessStep, program_steps
from ipuexp.emulator.memory_inputs import MemorySettings, ipu_figures, memory_settings
from ipuexp.emulator.oom import FailingIPU, oom_lines
from ipuexp.emulator.stash import StageStash, keyed_stage_stash
from ipuexp.emulator.tiles import TileLoad, tile0_excess, tile_load
from ipuexp.emulator.variables import place
from ipuexp.graph.types import BlockKey, Graph, Stage, TensorInfo
from ipuexp.execution.execution import ExecutionPlan
from ipuexp.execution.precision import is_float, tensor_bytes
from ipuexp.result import IPUMemory, MemoryFigures

ALWAYS_LIVE = ("weights", "gradient_accumulators", "optimizer_state", "stash", "host_io_buffers", "control_code",
               "internal_exchange_code", "host_exchange_code", "global_exchange_code")
NOT_ALWAYS_LIVE = ("activations", "temporary", "gradients", "streamed")
CATEGORIES = ALWAYS_LIVE + NOT_ALWAYS_LIVE

@dataclass
class IPUPlan:
    """Everything the model derives for one IPU."""

    ipu: int
    stages: List[Stage]
    amp: float
    always_live: Dict[str, int]
    steps: Sequence[Tuple[str, Dict[str, int]]]
    """(label, not-always-live bytes by category) per program step (shared between plans: read, never change)."""
    units: CodeUnits
    tile: TileLoad
    layers: int
    stash: List[StageStash] = field(default_factory=list)
    top: int = -1
    """Index of the peak step (the first of the largest total); -1: find it."""
    totals: Optional[Tuple[Tuple[int, ...], int, int]] = None
    """(bytes by category at the peak step in ``CATEGORIES``' order, not-always-live and always-live bytes) when
    known; None: ``memory_figures`` sums them."""

    @property
    def always_live_bytes(self) -> int:
        return sum(self.always_live.values())

    def peak_step(self) -> Tuple[str, Dict[str, int]]:
        if self.top >= 0:
            return self.steps[self.top]
        return max(self.steps, key=lambda st: sum(st[1].values())) if self.steps else ("", {})

def plan_ipus(plan: ExecutionPlan, graph: Graph, block_memo: Optional[Dict[Any, Dict]] = None) -> List[IPUPlan]:
    """Memory plans of every IPU of one replica. ``block_memo`` is accepted and unused: each block's temporaries
    and code keys are shared through a bounded cache (they depend only on the block, its IPU's tile context, the
    settings in the key and the tied table)."""
    s = memory_settings(plan)
    stages = plan.stages
    recompute = plan.recompute
    vocab = max((b.tied_parameters for b in graph.blocks), default=0)
    owner_ipu = _tied_owner_ipu(stages, vocab)
    first_inputs = stages[0].blocks[0].inputs if stages and stages[0].blocks else []
    plans = []
    for position, ipu in enumerate(plan.ipus):
        own = [st for st in stages if st.ipu == ipu]
        keys = tuple(st.key for st in own)
        ctx = plan.contexts[position]
        amp = ctx.amp_proportion
        temps, ops = ipu_figures(sum(keys, ()), ctx, s.training, s.serialisation, vocab)
        plans.append(_plan_ipu(ipu, own, keys, stages, s, amp, recompute, plan.stash_depths, temps, ops, owner_ipu,
                               vocab, first_inputs))
    return plans

def _tied_owner_ipu(stages: Sequence[Stage], tied: int) -> Optional[int]:
    """IPU of the block that owns the tied table: the first whose largest parameter is that big."""
    if not tied:
        return None
    for st in stages:
        for b in st.blocks:
            if b.largest_parameter >= tied:
                return st.ipu
    return None

def _plan_ipu(ipu: int, own: List[Stage], keys: Tuple[Tuple[BlockKey, ...], ...], stages: Sequence[Stage],
              s: MemorySettings, amp: float, recompute: bool, depths: Sequence[int], temps: Tuple[int, ...], ops: int,
              owner_ipu: Optional[int], vocab: int, first_inputs: List[TensorInfo]) -> IPUPlan:
    n_stages = len(stages)
    first = stages[0].blocks[0].key if own[0].index == 0 and first_inputs else None
    al, units, tile, stashes, steps, top, layers, totals = _ipu_core(
        ipu, keys, tuple(b.name for st in own for b in st.blocks), tuple(depths[st.index] for st in own),
        own[0].index == 0, own[-1].index == n_stages - 1, n_stages > 1, _boundary_tensors(own, stages, s.training), s,
        recompute, temps, ops, owner_ipu, vocab, first)
    return IPUPlan(ipu=ipu, stages=list(own), amp=amp, always_live=dict(al), steps=steps, units=units, tile=tile,
                   layers=layers, stash=list(stashes), top=top, totals=totals)

@lru_cache(maxsize=4096)
def _ipu_core(ipu: int, keys: Tuple[Tuple[BlockKey, ...], ...], names: Tuple[str, ...], depths: Tuple[int, ...],
              first_stage: bool, last_stage: bool, pipelined: bool, boundary: int, s: MemorySettings, recompute: bool,
              temps: Tuple[int, ...], ops: int, owner_ipu: Optional[int], vocab: int,
              first: Optional[BlockKey]) -> Tuple[Any, ...]:
    """The IPU plan's always-live bytes, code units, tile load, stashes, steps, peak step and layers (a planner meets
    the same IPU again and again). ``first``: the graph's first block when this IPU holds it."""
    loc = s.locations
    # Parameters held here: owned ones plus a copy of a tied table owned by another IPU.
    owned, owned_tensors, own_largest, uses_tied, layers = block_totals(sum(keys, ()))
    largest = own_largest
    tied_copy = vocab if vocab and owner_ipu is not None and owner_ipu != ipu and uses_tied else 0
    params = owned + tied_copy
    tensors = owned_tensors + (1 if tied_copy else 0)
    largest = max(largest, tied_copy)

    al: Dict[str, int] = {c: 0 for c in ALWAYS_LIVE}
    weights = place(params, tensors, largest, s.weight, loc.weights, s.replicas)
    al["weights"] = weights.on_chip_bytes
    weights_streamed = not loc.weights.on_chip or weights.sharded
    acc_streamed = False
    opt_streamed = 0
    if s.training:
        if s.accumulate:
            acc = place(params, tensors, largest, s.weight, loc.accumulators, s.replicas)
            al["gradient_accumulators"] = acc.on_chip_bytes
            acc_streamed = not loc.accumulators.on_chip
        per_param = s.first_state + s.second_state
        if per_param:
            opt = place(owned, owned_tensors, own_largest, per_param, loc.optimizer_state, s.replicas)
            al["optimizer_state"] = opt.on_chip_bytes
            if not loc.optimizer_state.on_chip:
                opt_streamed = int(largest * per_param / (s.replicas if opt.sharded else 1))

    # Stash FIFOs; without a pipeline, the tensors kept for backward are counted at each step instead.
    stashes: List[StageStash] = []
    if s.training:
        for ks, depth in zip(keys, depths):
            stashes.append(keyed_stage_stash(ks, depth, recompute, s.every_layer, s.stash))
        if loc.activations.on_chip and pipelined:
            al["stash"] = sum(x.bytes for x in stashes)

    # Host stream buffers: the micro-batch's inputs enter at stage 0; inference returns the last outputs.
    stream_tensors = 0
    if not s.synthetic:
        if first_stage:
            first_inputs = first.block.inputs if first is not None else []
            al["host_io_buffers"] += tensor_bytes(first_inputs, s.io_float_bytes) * s.prefetch
            stream_tensors += len(first_inputs)
        if last_stage:
            last = keys[-1][-1].block.outputs if keys[-1] else []
            if not s.training:
                al["host_io_buffers"] += tensor_bytes(last, s.act)
            stream_tensors += len(last) if not s.training else 1

    # Code.
    host_copies = 1
    if s.training:
        host_copies += (s.state_tensors if not loc.optimizer_state.on_chip else 0)
        host_copies += (1 if s.accumulate and not loc.accumulators.on_chip else 0)
    host_copies += 0 if loc.weights.on_chip else 1
    units = CodeUnits(
        ops=ops,
        host_tensors=tensors * host_copies + stream_tensors,
        boundary_tensors=boundary,
        parameter_tensors=tensors,
        parameter_elements=owned,
        tiles=s.tiles,
    )
    al.update(code_bytes(units, s.replicas, s.training))

    steps, top = program_steps(keys, names, s, recompute, pipelined, temps, stashes, weights_streamed, acc_streamed,
                               opt_streamed, largest)

    # Tiles: everything but the host buffers is spread over the compute tiles, tile 0 carrying the rounding.
    peak = sum(steps[top][1].values()) if steps else 0
    compute = sum(v for k, v in al.items() if k != "host_io_buffers") + peak
    linear = [al[c] for c in ("weights", "gradient_accumulators", "optimizer_state", "stash")]
    if s.io_tiles == 0:
        linear.append(al["host_io_buffers"])
    extra = tile0_excess(sum(1 for b in linear if b > 0))
    tile = tile_load(compute, extra, al["host_io_buffers"], s.tiles, s.io_tiles, s.tile_memory, s.io_proportion)
    at_peak = steps[top][1] if steps else {}
    totals = (tuple(int(al.get(c, 0) + at_peak.get(c, 0)) for c in CATEGORIES), int(sum(at_peak.values())),
              sum(al.values()))
    return al, units, tile, tuple(stashes), steps, top, layers, totals

def _boundary_tensors(own: List[Stage], stages: Sequence[Stage], training: bool) -> int:
    """Tensor copies between this IPU and others: activations forward, their gradients backward."""
    count = 0
    for st in own:
        i = st.index
        if i > 0 and stages[i - 1].ipu != st.ipu:
            count += _tensor_copies(st.blocks[0].key, True, training)
        if i < len(stages) - 1 and stages[i + 1].ipu != st.ipu:
            count += _tensor_copies(st.blocks[-1].key, False, training)
    return count

@lru_cache(maxsize=8192)
def _tensor_copies(key: BlockKey, inputs: bool, training: bool) -> int:
    """A block's inputs (or outputs) crossing to another IPU, and the gradients of the float ones in training."""
    tensors = key.block.inputs if inputs else key.block.outputs
    return len(tensors) + (sum(1 for t in tensors if is_float(t.dtype)) if training else 0)

@lru_cache(maxsize=8192)
def block_totals(keys: Tuple[BlockKey, ...]) -> Tuple[int, int, int, bool, int]:
    """(parameters, parameter tensors, largest parameter, whether any uses a tied table, layers) of blocks."""
    blocks = [k.block for k in keys]
    return (sum(b.parameters for b in blocks), sum(b.parameter_tensors for b in blocks),
            max((b.largest_parameter for b in blocks), default=0), any(b.tied_parameters for b in blocks),
            sum(1 for b in blocks if b.is_layer))

def estimate_memory(plan: ExecutionPlan, graph: Graph, block_memo: Optional[Dict[Any, Dict]] = None) -> MemoryFigures:
    """Memory of every IPU of one replica, and whether it fits (``block_memo``: see ``plan_ipus``)."""
    return memory_figures(plan_ipus(plan, graph, block_memo), plan)

def memory_figures(ipu_plans: Sequence[IPUPlan], plan: ExecutionPlan) -> MemoryFigures:
    """:class:`MemoryFigures` of computed IPU plans, with the out-of-memory report when a tile overflows."""
    tile_memory = int(plan.ipu.memory_per_tile_bytes)
    tiles = int(plan.ipu.tiles)
    ipus: List[IPUMemory] = []
    failing: List[FailingIPU] = []
    for ip in ipu_plans:
        if ip.totals is None:
            _, peak = ip.peak_step()
            breakdown = {c: int(ip.always_live.get(c, 0) + peak.get(c, 0)) for c in CATEGORIES}
            nal, al_bytes = int(sum(peak.values())), ip.always_live_bytes
        else:
            values, nal, al_bytes = ip.totals
            breakdown = dict(zip(CATEGORIES, values))
        io_overflow = ip.tile.io_buffer_bytes > ip.tile.io_buffer_limit if ip.tile.io_tile_bytes else False
        fits = ip.tile.max_tile_bytes <= tile_memory and not io_overflow
        tile = ip.ipu * tiles + ip.tile.max_tile
        ipus.append(IPUMemory(ipu=ip.ipu, capacity_bytes=tiles * tile_memory,
                              total_bytes=al_bytes + nal, always_live_bytes=al_bytes,
                              not_always_live_bytes=nal, max_tile_bytes=ip.tile.max_tile_bytes, max_tile=tile,
                              fits=fits, breakdown=breakdown))
        if not fits:
            failing.append(FailingIPU(ipu=ip.ipu, tile=tile, tile_bytes=ip.tile.max_tile_bytes,
                                      tile_memory=tile_memory, breakdown=breakdown, amp=ip.amp, layers=ip.layers,
                                      io_overflow=io_overflow, io_buffer_bytes=ip.tile.io_buffer_bytes,
                                      io_buffer_limit=ip.tile.io_buffer_limit))
    fits = not failing
    return MemoryFigures(fits=fits, ipus=ipus, report=oom_lines(failing, plan, capacity=tiles * tile_memory))

def liveness_series(plan: ExecutionPlan, graph: Graph, ipu: Optional[int] = None) -> List[LivenessStep]:
    """Bytes live at each program step of one IPU (default: the IPU whose fullest tile is fullest)."""
    return liveness_of(plan_ipus(plan, graph), ipu)

def liveness_of(plans: Sequence[IPUPlan], ipu: Optional[int] = None) -> List[LivenessStep]:
    """Liveness series of one computed plan."""
    if ipu is None:
        plan = max(plans, key=lambda p: p.tile.max_tile_bytes)
    else:
        matches = [p for p in plans if p.ipu == ipu]
        if not matches:
            raise ValueError(f"ipu: {ipu} is not allowed; allowed: {', '.join(str(p.ipu) for p in plans)}")
        plan = matches[0]
    al = plan.always_live_bytes
    return [LivenessStep(label, al, int(sum(d.values()))) for label, d in plan.steps]
