"""The constants that calibration fits (``python -m ipuexp.validate --fit``, ``python -m ipuexp.calibrate``): their
physical ranges and the priors every fit is drawn to."""
from __future__ import annotations

from typing import Dict, Tuple

FITTED: Dict[str, Tuple[float, float]] = {
    "amp_efficiency": (0.05, 1.0),
    "vector_efficiency": (0.02, 1.0),
    "compute_set_cycles": (1.0, 5000.0),
    "gw_step_latency_s": (1e-6, 1e-4),
    "host_step_s": (1e-4, 1.0),
    "popart_step_s": (1e-4, 1.0),
    "replica_feed_s": (1e-6, 0.01),
}
"""Constants fitted to the calibration rows, with the physical range each may take (at most 8: hardware- and
host-software-level, shared by Mk2 and Bow)."""

PRIORS: Dict[str, float] = {
    "amp_efficiency": 0.8,
    "vector_efficiency": 0.3,
    "compute_set_cycles": 1000.0,
    "gw_step_latency_s": 5e-6,
    "host_step_s": 0.085,
    "popart_step_s": 0.085,
    "replica_feed_s": 7e-4,
}
"""Where every fit is drawn to (weakly, ``PRIOR_WEIGHT``) and where every held-out fit starts: a constant the remaining
rows cannot determine (the GW-Link step when no multi-rack row is left) stays near this value, and no held-out fit
inherits the in-sample one. amp_efficiency: most of the AMP peak; vector_efficiency: PopLibs element-wise vertices
reach about 1/4 of the load path at best (Jia et al. 2019 on compiler-generated loops), of which a share;
compute_set_cycles: a global sync and a 6-worker launch are about 600 + 300 cycles; gw_step_latency_s: one 100 GbE
RoCE hop and a cross-rack sync, a few microseconds; host_step_s: Optimum Graphcore's two notebook runs of one
12-layer model at GA 16 and GA 64 (64 and 256 samples per host call, 139.5 and 264 ms per call) leave about 98 ms
per host call beyond 2.6 ms per micro-batch, of which the fill and drain of their 4-IPU pipelines (PopART merges
each IPU's AutoIncrement stages into one) take about 10 ms: about 85 ms for the host (docs/emulator.md, "The host
call"); popart_step_s: the same OptimizerFromHost run and step loop, from PopART's side, with no public figure of
its own, so the same prior; replica_feed_s: the same two runs take about 264 and 139.5 ms per call where the
engine's device work is about 1 ms per micro-batch; with host_step_s, their difference of 48 micro-batches is about
2.7 ms each, for 4 replicas fed by one process (docs/emulator.md, "One host process feeds its replicas")."""
