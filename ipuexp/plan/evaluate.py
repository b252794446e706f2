"""Evaluate candidates: the rule table, a cheap memory lower bound, then the emulator's memory and timing.

Every number comes from the engines the job uses (``execution.build_plan``, ``emulator.memory``,
``emulator.timing``, ``calibration.band``); the planner adds only the order of work and its caches. Graphs are
captured once per micro-batch size and shared by every candidate; the matmul plans (``emulator.matmul_plan``) and the
per-block cycles of each tile context (``timing.analyse(block_memo=...)``) are shared across candidates too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ipuexp.calibration.band_ends import band_ends
from ipuexp.config.errors import ConfigError
from ipuexp.config.schema import ExperimentConfig, option_value
from ipuexp.emulator.oom import human
from ipuexp.plan.candidate import Candidate, Layout, apply

FITS, OOM, PRUNED, INVALID = "fits", "oom", "pruned", "invalid"


def lower_end(samples_per_s: float, band_pct: Optional[float]) -> float:
    """The lower end of a prediction's band (``calibration.band_ends``): the throughput at which its error reaches
    the band. About ``samples x (1 - band)`` for a narrow band, and still positive, and ordered, for a band over
    100%."""
    return samples_per_s if band_pct is None else band_ends(samples_per_s, band_pct)[0]


@dataclass
class Outcome:
    """What the planner knows about one candidate."""

    candidate: Candidate
    status: str
    """fits, oom (the memory model says it does not fit), pruned (the lower bound says so, not timed) or invalid
    (the config rule table rejects it: not a candidate)."""
    reason: str = ""
    """Why it was rejected, in one line."""
    samples_per_s: float = 0.0
    score: float = 0.0
    """What the planner maximises (``plan.rank``): the lower end of the band, or ``samples_per_s`` itself."""
    band_pct: Optional[float] = None
    extrapolated: Optional[str] = None
    nearest: Optional[Tuple[str, float]] = None
    """The nearest calibration row and how far beyond its reach (reach-widths), when known."""
    """The axes on which no calibration row reaches the candidate (``calibration.reach``); None when one does."""
    step_time_s: float = 0.0
    peak_tile_bytes: int = 0
    """Bytes on the fullest tile over the replica's IPUs (for pruned candidates: the lower bound)."""
    peak_tile_ipu: int = 0
    peak_ipu_bytes: int = 0
    """Total bytes on the fullest IPU."""
    peak_ipu: int = 0
    shortfall_bytes: int = 0
    """Bytes the fullest tile is over its limit (tile memory less the headroom); 0 when it fits."""
    tile_limit_bytes: int = 0
    tile_memory_bytes: int = 0
    ipu_capacity_bytes: int = 0
    ipu_tile_bytes: List[int] = field(default_factory=list)
    """Fullest tile of each IPU of the replica."""

    @property
    def fits(self) -> bool:
        return self.status == FITS

    @property
    def tile_headroom(self) -> float:
        """Share of tile memory left on the fullest tile."""
        return 1.0 - self.peak_tile_bytes / self.tile_memory_bytes if self.tile_memory_bytes else 0.0

    @property
    def ipu_headroom(self) -> float:
        """Share of the fullest IPU's memory left."""
        return 1.0 - self.peak_ipu_bytes / self.ipu_capacity_bytes if self.ipu_capacity_bytes else 0.0


class Evaluator:
    """Evaluates candidates of one base configuration; holds the graphs and the caches (one per process)."""

    def __init__(self, base: ExperimentConfig, graph_for: Callable[[int], Any], headroom: float = 0.0,
                 rank: str = "lower"):
        self.base = base
        self.rank = rank
        self.graph_for = graph_for
        self._graphs: Dict[int, Any] = {}
        self._stages: Dict[Tuple[Layout, int], Any] = {}
        self._memos: Dict[int, Dict] = {}
        self._memory_memos: Dict[int, Dict] = {}
        self.tile_memory = int(base.ipu.memory_per_tile_bytes)
        self.tiles = int(base.ipu.tiles)
        self.limit = int(self.tile_memory * (1.0 - headroom))

    def graph(self, micro_batch: int) -> Any:
        g = self._graphs.get(micro_batch)
        if g is None:
            g = self._graphs[micro_batch] = self.graph_for(micro_batch)
        return g

    def stages(self, layout: Layout, micro_batch: int) -> Any:
        from ipuexp.graph.stages import assign_stages, merges_stages

        key = (layout, micro_batch)
        st = self._stages.get(key)
        if st is None:
            st = self._stages[key] = assign_stages(self.graph(micro_batch).blocks, list(layout.layers_per_ipu),
                                                   list(layout.device_mapping) if layout.device_mapping else None,
                                                   merge=merges_stages(self.base.host.framework))
        return st

    def evaluate(self, c: Candidate) -> Outcome:
        from ipuexp.calibration.band import error_band
        from ipuexp.calibration.user import residuals_for
        from ipuexp.config.validate import validate
        from ipuexp.emulator.memory import estimate_memory
        from ipuexp.emulator.position import point_of
        from ipuexp.emulator.timing import estimate_throughput
        from ipuexp.execution.execution import build_plan

        exp = apply(self.base, c)
        try:
            validate(exp)
        except ConfigError as err:
            return Outcome(c, INVALID, reason=str(err))
        stages = self.stages(c.layout, c.micro_batch)
        out = Outcome(c, INVALID, tile_limit_bytes=self.limit, tile_memory_bytes=self.tile_memory,
                      ipu_capacity_bytes=self.tiles * self.tile_memory)
        bound = variables_bound(exp, stages)
        worst = max(bound, key=lambda kv: kv[1])
        if worst[1] > self.limit:
            out.status = PRUNED
            out.peak_tile_ipu, out.peak_tile_bytes = worst
            out.shortfall_bytes = worst[1] - self.limit
            out.reason = (f"IPU {worst[0]} short by at least {human(out.shortfall_bytes)} per tile: weights, "
                          "accumulators and optimizer state alone need "
                          f"{human(worst[1])} of the {human(self.limit)} a tile may use")
            return out
        graph = self.graph(c.micro_batch)
        plan = build_plan(exp, stages)
        memory = estimate_memory(plan, graph, block_memo=self._memory_memos.setdefault(c.micro_batch, {}))
        thr = estimate_throughput(plan, graph, block_memo=self._memos.setdefault(c.micro_batch, {}))
        band = error_band(graph.model, len(plan.ipus) * plan.replicas, c.micro_batch, c.grad_accum,
                          ipu=str(plan.ipu.name), residuals=residuals_for(exp.calibration),
                          point=point_of(exp.model, graph.model, plan, memory))
        out.samples_per_s, out.step_time_s = thr.samples_per_s, thr.step_time_s
        out.band_pct = band.pct if band is not None else None
        out.extrapolated = band.extrapolated if band is not None else None
        out.nearest = (band.nearest, band.distance) if band is not None and band.nearest else None
        out.score = lower_end(out.samples_per_s, out.band_pct) if self.rank == "lower" else out.samples_per_s
        out.ipu_tile_bytes = [m.max_tile_bytes for m in memory.ipus]
        tile = max(memory.ipus, key=lambda m: m.max_tile_bytes)
        ipu = max(memory.ipus, key=lambda m: m.total_bytes)
        out.peak_tile_bytes, out.peak_tile_ipu = tile.max_tile_bytes, tile.ipu
        out.peak_ipu_bytes, out.peak_ipu = ipu.total_bytes, ipu.ipu
        out.shortfall_bytes = max(0, tile.max_tile_bytes - self.limit)
        io_short = [m.ipu for m in memory.ipus if m.fits is False and m.max_tile_bytes <= self.tile_memory]
        if out.shortfall_bytes == 0 and not io_short:
            out.status = FITS
            return out
        out.status = OOM
        if out.shortfall_bytes:
            top = max(((v, k) for k, v in tile_breakdown(memory, tile.ipu).items()), default=(0, "?"))
            out.reason = (f"IPU {tile.ipu} short by {human(out.shortfall_bytes)} on its fullest tile "
                          f"({human(tile.max_tile_bytes)} of the {human(self.limit)} a tile may use; largest: "
                          f"{top[1]})")
        else:
            out.reason = (f"IPU {io_short[0]}: the IO tiles cannot hold a micro-batch's stream buffers "
                          f"(options.io.num_io_tiles={c.io_tiles})")
        return out


def tile_breakdown(memory: Any, ipu: int) -> Dict[str, int]:
    for m in memory.ipus:
        if m.ipu == ipu:
            return dict(m.breakdown)
    return {}


def variables_bound(exp: ExperimentConfig, stages: Any) -> List[Tuple[int, int]]:
    """(IPU, lower bound of its fullest tile's bytes) for every IPU of a replica, from the always-live variables
    of the parameters it owns (weights, gradient accumulators, optimizer state after tensor locations) spread
    evenly over all its tiles. The memory model holds at least these (plus a tied table's copy, code, stash and
    the peak step) on its compute tiles, and its fullest tile at least their mean, so a candidate over the limit
    here is over it there too; it costs microseconds against milliseconds for the memory model."""
    from ipuexp.emulator.memory import block_totals
    from ipuexp.emulator.variables import place, state_bytes
    from ipuexp.execution.precision import precision_bytes

    o = exp.options
    loc = o.tensor_locations
    weight = precision_bytes(str(o.precision)).weight
    first, second = state_bytes(option_value(exp.optimizer.name), option_value(exp.optimizer.state_precision))
    replicas = int(o.replication_factor)
    accumulate = exp.training and int(o.gradient_accumulation) > 1
    tiles = int(exp.ipu.tiles)
    per_ipu: Dict[int, Tuple[Any, ...]] = {}
    for st in stages:
        per_ipu[st.ipu] = per_ipu.get(st.ipu, ()) + st.key
    out = []
    for ipu, keys in sorted(per_ipu.items()):
        params, tensors, largest, _, _ = block_totals(keys)
        total = place(params, tensors, largest, weight, loc.weights, replicas).on_chip_bytes
        if exp.training:
            if accumulate:
                total += place(params, tensors, largest, weight, loc.accumulators, replicas).on_chip_bytes
            if first + second:
                total += place(params, tensors, largest, first + second, loc.optimizer_state, replicas).on_chip_bytes
        out.append((ipu, total // tiles))
    return out
