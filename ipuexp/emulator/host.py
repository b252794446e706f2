"""The host side of a step: what one host call costs, and the input each micro-batch brings from the host.

A host call runs ``device_iterations`` weight updates (training). Besides the device's work it costs the Poplar
runtime's round trip (``host_latency_s``) and, in a PopTorch training loop, the loop's own work per call
(``host_step_s``: the model call's host side and the ``setOptimizer`` that Graphcore's PopTorch applications and
Optimum Graphcore's Trainer make after every step; in a PopART loop ``popart_step_s``: ``session.run``'s host side
and the ``updateOptimizerFromHost`` after every step); both are shared by the device iterations of the call (PopTorch
pipelining tutorial: "increasing deviceIterations improves efficiency by reducing the number of interactions
between the host CPU and the IPU"). The input of each micro-batch crosses the host link while the pipeline runs,
overlapped by IO tiles where the schedule allows, and each host process prepares its replicas' buffers one after
the other (IPU optimisation guide sections 4.3 and 4.4).
"""
from __future__ import annotations

from math import ceil
from typing import Any, Dict

from ipuexp.config.schema import option_value
from ipuexp.emulator.collectives import host_bytes_per_s_per_replica, io_bytes_per_sample
from ipuexp.execution.execution import ExecutionPlan
from ipuexp.execution.hardware import TileContext
from ipuexp.graph.types import Graph

POPTORCH_LOOPS = ("poptorch", "optimum")
"""``host.framework`` values whose loop calls a PopTorch model and ``setOptimizer`` once per host call."""
POPART_LOOPS = ("popart",)
"""``host.framework`` values whose loop calls ``session.run`` and ``updateOptimizerFromHost`` once per host call
(Graphcore's PopART BERT and its MLPerf submissions: the learning rate schedule has an entry for every step,
``bert_optimizer.py``). TensorFlow runs the loop on the device and pays neither."""


def host_call_s(plan: ExecutionPlan) -> float:
    """Seconds one host call costs on top of the device's work."""
    cal = plan.rates.calibration
    seconds = cal.host_latency_s
    framework = option_value(plan.host.framework)
    if framework in POPTORCH_LOOPS:
        seconds += cal.host_step_s
    elif framework in POPART_LOOPS:
        seconds += cal.popart_step_s
    return seconds


def host_io(plan: ExecutionPlan, graph: Graph, ctx0: TileContext) -> Dict[str, Any]:
    """Host IO per micro-batch: transfer time, whether IO tiles overlap it, what never overlaps, and how long
    the host needs to prepare the buffers of one micro-batch for the replicas one host process serves."""
    opts, r = plan.options, plan.rates
    ipus_per_replica = len(plan.ipus)
    if opts.synthetic_data:
        return dict(io_s=0.0, io_overlap=False, io_exposed_s=0.0, host_period_s=0.0)
    mbs = plan.data.micro_batch_size
    per_sample = io_bytes_per_sample(graph.input_bytes_per_sample, graph.input_elements_per_sample,
                                     str(plan.data.io_precision))
    nbytes = per_sample * mbs
    bw = host_bytes_per_s_per_replica(r.host_link_bytes_per_s, opts.replication_factor, ipus_per_replica,
                                      r.ipus_per_machine)
    transfer = nbytes / bw
    latency = r.calibration.host_latency_s
    # With one buffer the IPU waits for the host's hand-over at each copy (PopTorch IO guide 8.1: the
    # StreamCopy Begin/End phases); a deeper prefetch lets the host fill the next buffer ahead.
    exposed = latency if opts.io.prefetch_depth <= 1 else 0.0
    io_tiles = opts.io.num_io_tiles
    overlap = False
    if io_tiles > 0 and (ipus_per_replica == 1 or option_value(opts.pipeline.schedule) == "grouped"):
        # IO tiles overlap the transfer with compute (IPU optimisation guide section 4.4.2) for the share of a
        # micro-batch their buffers hold, then the compute tiles fetch it over the exchange.
        capacity = io_tiles * r.tile_memory_bytes * opts.io.io_tiles_available_memory_proportion
        held = min(1.0, capacity / nbytes) if nbytes else 1.0
        exposed += transfer * (1.0 - held)
        transfer *= held
        fetch = nbytes / (min(io_tiles, ctx0.compute_tiles) * ctx0.exchange_bytes_per_cycle)
        exposed += (fetch + ctx0.sync_cycles + ctx0.compute_set_cycles) / r.clock_hz
        overlap = True
    # Each host process (PopRun instance) prepares the buffers of its replicas one after the other; every host
    # server runs at least one process. Under PopTorch and PopART that is PopART's stream callbacks, one per input
    # and replica, on Poplar's one default callback thread (streamCallbacks.multiThreadMode singleThread; IPU
    # optimisation guide 4.4.2 advises more threads for many replicas); TensorFlow's infeeds have threads of their
    # own.
    processes = max(int(opts.num_instances), 1, min(r.num_hosts, int(opts.replication_factor)))
    per_instance = ceil(opts.replication_factor / processes)
    callbacks = option_value(plan.host.framework) in POPTORCH_LOOPS + POPART_LOOPS
    feed = r.calibration.replica_feed_s if callbacks else 0.0
    return dict(io_s=transfer, io_overlap=overlap, io_exposed_s=exposed,
                host_period_s=per_instance * (latency + feed))
