"""Rates of one IPU generation and system, derived from ``conf/ipu`` and ``conf/system``.

Every hardware figure comes from the config (each with its source in the YAML); the fitted constants come from
the ``calibration:`` block of ``conf/ipu/<gen>.yaml`` (each with its fitting note). Nothing here is a literal
hardware number: this module only turns the configured figures into the units the cost model uses.
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from operator import attrgetter
from typing import Any, Mapping

from ipuexp.config.schema import IPUHardware, SystemConfig, option_value
from ipuexp.execution.precision import partials_bytes, precision_bytes


RING_HOPS = {"ladder": 1, "2d_torus": 2}
"""IPU-Link hops between ring neighbours per topology: PopLibs' ring over replicas (ReplicatedCollectives.cpp,
RingTopology) walks a ladder in order and a torus in the interleaved order 0,7,1,6,... (two hops a step)."""


@dataclass(frozen=True)
class Calibration:
    """Constants of the cycle model; values and fitting notes live in ``conf/ipu/<gen>.yaml`` ``calibration:``."""

    amp_efficiency: float
    """Share of the AMP peak reached inside matmul/convolution vertices (pipeline fill, loop overheads)."""
    vector_efficiency: float
    """Share of the tile load/store bandwidth reached by element-wise, normalisation and softmax vertices."""
    compute_set_cycles: float
    """Fixed cycles of one compute set beyond its BSP sync (supervisor start, worker dispatch, small-vertex tail)."""
    amp_grain: int
    """Input channels the AMP consumes per pass at 16-bit inputs (half at 32-bit); matmul K is padded to it."""
    links_per_neighbour: int
    """IPU-Links between two neighbouring IPUs of a replica (inter-IPU copies of a pipeline)."""
    global_sync_cycles: float
    """Cycles of one synchronisation across the IPUs of a pipeline (one per pipeline cycle) or of a ring."""
    host_latency_s: float
    """Seconds of one host round trip: paid per host call, and per stream copy when the host is not ahead."""
    gw_step_latency_s: float = 0.0
    """Seconds of one ring step of a collective whose slowest hop crosses a GW-Link between racks (gateway,
    100 GbE RoCE hop and the cross-rack sync); the network's, not the tile clock's."""
    ring_step_supersteps: int = 4
    """Supersteps of one ring step of a collective inside a rack (slice, cross-replica copy, reduce, index)."""
    hop_latency_s: float = 15e-9
    """Seconds of one IPU-Link hop of a synchronisation signal (paid twice, there and back)."""
    host_step_s: float = 0.0
    """Seconds of a PopTorch training loop's own work per host call (``host.framework`` poptorch or optimum): the
    model call's host side and the LR schedule's ``setOptimizer`` after every step (PopTorch rebuilds the optimizer
    for every weight and runs the ``OptimizerFromHost`` program), and the Trainer's step under Optimum; the host's
    time, not the tile clock's."""
    replica_feed_s: float = 0.0
    """Seconds a PopTorch or PopART host process spends handing one micro-batch to one of its replicas: PopART's
    stream callbacks copy each replica's inputs (``InputDatastream::read``) on Poplar's one default callback
    thread, so a micro-batch cannot enter the pipeline faster than the process serves all its replicas; the
    host's time, not the tile clock's."""
    popart_step_s: float = 0.0
    """Seconds of a PopART training loop's own work per host call (``host.framework`` popart): ``session.run``'s
    host side, preparing the step's input arrays, and the ``updateOptimizerFromHost`` that Graphcore's MLPerf BERT
    makes after every step (its learning rate changes every step): a second engine run that syncs every IPU of
    the process; the host's time, not the tile clock's."""

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], generation: str) -> "Calibration":
        missing = [f.name for f in fields(cls) if f.name not in values and f.default is MISSING]
        if missing:
            raise ValueError(f"ipu.calibration is missing {', '.join(missing)} for generation {generation!r}: "
                             f"see conf/ipu/{generation}.yaml")
        # YAML numbers may arrive as int or float; the annotation (a string here) names the wanted type.
        cal = cls(**{f.name: (int if f.type == "int" else float)(values[f.name]) for f in fields(cls)
                     if f.name in values})
        checks = {"amp_efficiency": (0 < cal.amp_efficiency <= 1, "in (0, 1]"),
                  "vector_efficiency": (0 < cal.vector_efficiency <= 1, "in (0, 1]"),
                  "compute_set_cycles": (cal.compute_set_cycles >= 0, ">= 0"),
                  "amp_grain": (cal.amp_grain >= 1, ">= 1"),
                  "links_per_neighbour": (cal.links_per_neighbour >= 1, ">= 1"),
                  "global_sync_cycles": (cal.global_sync_cycles >= 0, ">= 0"),
                  "host_latency_s": (cal.host_latency_s >= 0, ">= 0"),
                  "gw_step_latency_s": (cal.gw_step_latency_s >= 0, ">= 0"),
                  "ring_step_supersteps": (cal.ring_step_supersteps >= 1, ">= 1"),
                  "hop_latency_s": (cal.hop_latency_s >= 0, ">= 0"),
                  "host_step_s": (cal.host_step_s >= 0, ">= 0"),
                  "popart_step_s": (cal.popart_step_s >= 0, ">= 0"),
                  "replica_feed_s": (cal.replica_feed_s >= 0, ">= 0")}
        for name, (ok, allowed) in checks.items():
            if not ok:
                raise ValueError(f"ipu.calibration.{name}={getattr(cal, name)!r} is invalid: allowed {allowed}")
        return cal


@dataclass(frozen=True)
class TileContext:
    """What the op cost model needs about one IPU under one configuration (hashable: plans are cached on it)."""

    compute_tiles: int
    """Tiles left for compute (all tiles minus IO tiles)."""
    tile_memory_bytes: int
    amp_proportion: float
    """availableMemoryProportion on this IPU."""
    flops_per_cycle: float
    """Peak AMP FLOPs per cycle per tile at this precision and partials type."""
    input_bytes: int
    """Bytes per matmul/conv input element."""
    partial_bytes: int
    """Bytes per matmul/conv partial."""
    activation_bytes: int
    """Bytes per activation element (element-wise work)."""
    tile_bytes_per_cycle: float
    exchange_bytes_per_cycle: float
    """Bytes a tile can receive per cycle during an exchange phase."""
    sync_cycles: float
    amp_efficiency: float
    vector_efficiency: float
    compute_set_cycles: float
    amp_grain: int
    workers: int
    """Worker threads per tile (``ipu.workers_per_tile``)."""

    def __hash__(self) -> int:
        # The engine's caches key on contexts many times per configuration: hash the fields once.
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(_context_fields(self))
            object.__setattr__(self, "_hash", h)
        return h


_context_fields = attrgetter(*(f.name for f in fields(TileContext)))


@dataclass(frozen=True)
class Rates:
    """Seconds-level rates of the system for one configuration."""

    clock_hz: float
    tiles: int
    io_tiles: int
    peak_flops_per_ipu: float
    """Peak FP16.16 FLOP/s of one IPU (the system's upper bound)."""
    neighbour_link_bytes_per_s: float
    """Bandwidth between two neighbouring IPUs of a replica (inter-IPU copies of a pipeline)."""
    link_bytes_per_s: float
    """One IPU-Link, one direction."""
    ring_bytes_per_s: float
    """What one IPU moves per second on a bidirectional ring over IPU-Links (one link each way)."""
    ring_hops: int
    """IPU-Link hops between neighbours of a ring of replicas (topology: 1 on a ladder, 2 on a torus, whose
    interleaved ring order 0,7,1,6,... skips the loopback cables)."""
    num_hosts: int
    """Host servers of the system (each runs at least one host process)."""
    host_link_bytes_per_s: float
    """Host link bandwidth of one IPU-Machine."""
    streaming_memory_bytes_per_s: float
    gw_link_bytes_per_s: float
    ipus_per_machine: int
    num_racks: int
    tile_memory_bytes: int
    exchange_bytes_per_cycle: float
    tile_bytes_per_cycle: float
    calibration: Calibration


def amp_flops_per_cycle(ipu: Any, precision: str, partials_type: Any) -> float:
    """Peak AMP FLOPs per cycle per tile: the fp16 figure is for half partials; float partials halve it
    (IPU optimisation guide section 5.2: each halving of the partials precision doubles matmul/convolution
    speed)."""
    if precision_bytes(precision).compute >= 4:
        return float(ipu.flops_per_cycle_per_tile_fp32)
    fp16 = float(ipu.flops_per_cycle_per_tile_fp16)
    return fp16 if partials_bytes(option_value(partials_type)) == 2 else fp16 / 2



def rates(ipu: IPUHardware, system: SystemConfig, io_tiles: int) -> Rates:
    """The chip's and system's figures in the cost model's units, with the calibration constants."""
    cal = Calibration.from_mapping(ipu.calibration or {}, ipu.name)
    clock = float(ipu.clock_hz)
    tiles = int(ipu.tiles)
    # "IPU-Links bandwidth 320 GB/s" over 10 links counts both directions: 16 GB/s per link per direction
    # (a PCIe Gen4 x8-class SerDes link, 15.75 GB/s each way).
    per_link = float(ipu.ipu_link_bytes_per_s) / max(int(ipu.ipu_links), 1) / 2
    return Rates(
        clock_hz=clock,
        tiles=tiles,
        io_tiles=int(io_tiles),
        peak_flops_per_ipu=float(ipu.flops_per_cycle_per_tile_fp16) * tiles * clock,
        neighbour_link_bytes_per_s=per_link * cal.links_per_neighbour,
        link_bytes_per_s=per_link,
        ring_bytes_per_s=2 * per_link,
        ring_hops=RING_HOPS.get(str(system.topology), 1),
        num_hosts=max(1, int(system.num_hosts)),
        host_link_bytes_per_s=float(ipu.host_link_bytes_per_s),
        streaming_memory_bytes_per_s=float(ipu.streaming_memory_bytes_per_s),
        gw_link_bytes_per_s=float(system.gw_link_bytes_per_s),
        ipus_per_machine=int(system.ipus_per_machine),
        num_racks=max(1, int(system.num_racks)),
        tile_memory_bytes=int(ipu.memory_per_tile_bytes),
        exchange_bytes_per_cycle=float(ipu.exchange_bytes_per_s) / clock / tiles,
        tile_bytes_per_cycle=float(ipu.tile_memory_bytes_per_cycle),
        calibration=cal,
    )
