"""Data movement outside a pipeline stage: gradient collectives, replicated tensor sharding, host IO and
Streaming Memory.

* Collectives run on the IPUs over IPU-Links inside a rack and over GW-Links between racks, without the host
  (TF distributed-training guide section 9, "Pod systems"). The gradients of one IPU of a replica are reduced
  with the same IPU of every other replica, on a ring; the rings of the IPUs of a replica run at the same time.
* Replicated tensor sharding (IPU optimisation guide section 4.7) turns the all-reduce into a reduce-scatter of
  the gradients, an update of 1/R of the optimizer state, and an all-gather of the updated weights.
* Host IO goes over the IPU-Machine's host link, shared by the replicas fed through it (IPU optimisation guide
  section 4.4).
* Off-chip tensors move over the IPU's Streaming Memory bandwidth (IPU optimisation guide section 5.4; PopTorch
  pipelining tutorial "offloading").
"""
from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from ipuexp.execution.precision import IO_PRECISION_BYTES


@dataclass(frozen=True)
class LinkRates:
    ring_bytes_per_s: float
    """What one IPU sends (and receives) per second on a bidirectional ring over IPU-Links."""
    gw_bytes_per_s: float
    """GW-Link bandwidth of a machine per direction, divided among the rings that cross racks through it."""
    step_latency_s: float
    """Fixed cost of one ring step inside a rack: the step's supersteps, the cross-replica sync and its hops."""
    gw_step_latency_s: float = 0.0
    """Fixed cost of one ring step once the ring crosses a GW-Link between racks."""


def ring_allreduce_s(nbytes: float, replicas: int, bytes_per_s: float, step_latency_s: float) -> float:
    """Ring all-reduce: reduce-scatter then all-gather, 2(R-1) steps of nbytes/R each."""
    if replicas <= 1 or nbytes <= 0:
        return 0.0
    r = replicas
    return 2 * (r - 1) / r * nbytes / bytes_per_s + 2 * (r - 1) * step_latency_s


def ring_reduce_scatter_s(nbytes: float, replicas: int, bytes_per_s: float, step_latency_s: float) -> float:
    """Reduce-scatter (or all-gather, the same traffic): R-1 steps of nbytes/R each."""
    if replicas <= 1 or nbytes <= 0:
        return 0.0
    r = replicas
    return (r - 1) / r * nbytes / bytes_per_s + (r - 1) * step_latency_s


def ring_rates(racks: int, links: LinkRates) -> tuple:
    """(bytes per second, seconds per step) of one flat ring over the replicas: inside one rack the IPU-Link
    ring; once it spans racks, its slowest hop is a GW-Link, which bounds both."""
    if racks <= 1:
        return links.ring_bytes_per_s, links.step_latency_s
    return (min(links.ring_bytes_per_s, links.gw_bytes_per_s),
            max(links.step_latency_s, links.gw_step_latency_s))


def allreduce_s(nbytes: float, replicas: int, racks: int, links: LinkRates) -> float:
    """All-reduce across replicas as PopLibs runs it: one flat ring over every replica (ReplicatedCollectives.cpp
    builds a RingTopology over all replicas and picks a meet-in-the-middle ring for more than 16 ranks), 2(R-1)
    steps, each moving nbytes/R at the ring's bandwidth and paying its fixed step cost. Both grow with the
    system: the bandwidth term saturates at 2 nbytes/B, the latency term grows with R, and a ring that spans racks
    pays a GW-Link step."""
    racks = max(1, min(racks, replicas))
    bw, step = ring_rates(racks, links)
    return ring_allreduce_s(nbytes, replicas, bw, step)


def sharded_update_collectives_s(grad_bytes: float, weight_bytes: float, replicas: int, racks: int,
                                 links: LinkRates) -> float:
    """RTS: reduce-scatter the gradients, all-gather the updated weights (each half an all-reduce's traffic)."""
    if replicas <= 1:
        return 0.0
    half_rs = allreduce_s(grad_bytes, replicas, racks, links) / 2
    half_ag = allreduce_s(weight_bytes, replicas, racks, links) / 2
    return half_rs + half_ag


def host_bytes_per_s_per_replica(host_link_bytes_per_s: float, replicas: int, ipus_per_replica: int,
                                 ipus_per_machine: int) -> float:
    """Each IPU-Machine's host link is shared by the replicas whose input IPU it holds."""
    ipus = replicas * ipus_per_replica
    machines = max(1, ceil(ipus / max(ipus_per_machine, 1)))
    # A replica's input enters through its first IPU; replicas are packed consecutively onto machines.
    replicas_per_machine = max(1, ceil(replicas / machines))
    return host_link_bytes_per_s / replicas_per_machine


def io_bytes_per_sample(input_bytes: int, input_elements: int, io_precision: str) -> float:
    """Host-to-IPU bytes per sample: the capture's dtype (auto) or the configured IO type (IPU optimisation guide
    section 4.4.3)."""
    if io_precision == "auto":
        return float(input_bytes)
    assert io_precision in IO_PRECISION_BYTES, io_precision  # validated with the config
    size = IO_PRECISION_BYTES[io_precision]
    # Integer inputs narrower than the IO type (token ids stay as they are when already smaller) are not widened.
    return float(min(input_bytes, input_elements * size)) if input_elements else float(input_bytes)


def streaming_s(nbytes: float, streaming_bytes_per_s: float) -> float:
    return nbytes / streaming_bytes_per_s if nbytes > 0 else 0.0
