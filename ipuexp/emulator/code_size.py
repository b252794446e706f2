"""Code and exchange-code memory of one IPU: how it grows with operations, tensors and replicas.

IPU optimisation guide section 3.5: code size cannot be predicted from first principles; the way to estimate it
is to measure how it grows with the model. The only measurement published is the IPU optimisation guide's
Table 4.1 (BERT-Large, whole replica of 4 IPUs, 1 and 4 replicas), so the model below has one unit of growth per
code category and each constant is that table's figure divided by the units of the BERT-Large capture in the
configuration it was measured in.

Units:
* compute programs (``ops``): control code (vertex code, vertex state, control program) and internal exchange
  code grow with the distinct operations an IPU runs. Outlining (IPU optimisation guide section 5.5) keeps one
  copy of the code of identical operations, so an operation counts once per distinct (op, shape) on the IPU;
  repeated layers cost nothing more, recomputation reuses the forward code. An operation the planner serialises
  adds the dynamic slice and update steps of its loop (2 units; TF2 IPU guide section 5.1.2: a lower proportion
  "increases always-live memory as more control code is needed to deal with the planning of the split
  calculations").
* host tensors: host exchange code copies each weight to and from the host, each off-chip tensor to and from
  Streaming Memory (IPU optimisation guide section 5.4: offloading "will create some exchange code") and each
  data stream.
* boundary tensors: global exchange code copies every tensor crossing to another IPU (each end counts one).
* replicas: IPU optimisation guide section 4.3.1, replication "increases the exchange code, linearly with the
  number of replicas" (measured from 1 to 4 replicas). The collective is a ring over the replicas (PopLibs
  ``ReplicatedCollectives.cpp``): each step selects the fragment for the IPU's ring position with a ``Switch`` of
  one case per position (12 bytes of code per case, ``bytesPerCase = 3 * 4``), so that code grows with the ring
  length, by a fixed amount per parameter tensor per ring position. PopLibs replaces the switch by a dynamic
  slice of a sliceable copy of the gradient when the fragment a tile holds at one step is smaller than
  ``SWITCH_BOUND_ELEMENTS`` elements (switch code per tile, 12 B x 8 expected calls per position, exceeds the
  fragment per tile): then the code no longer grows with the ring, the cases are gone, and a gradient-sized
  temporary takes their place during the collective. Global exchange code therefore depends on the collective
  pattern (ring length and fragment per tile), not linearly on the total replica count. Table 4.1 shows control and internal exchange code growing too
  (the on-chip parts of the cross-replica reduction and of sharding); the guide does not say they grow with the
  replica count, and Graphcore ran one ResNet-50 program with 16, 64, 128 and 256 replicas (MLPerf Training v1.1
  Graphcore ResNet-50 configs.yml, ``mk2_resnet50_mlperf_pod*_lars``), which a per-replica growth like Table
  4.1's 25 MB over 3 extra replicas would not leave room for; they are therefore a one-off cost per parameter
  tensor once there are replicas.
  Only training reduces across replicas.

Table 4.1's run is taken to be Graphcore's BERT-Large pretraining configuration of the guide's time
(graphcore/examples@9b61ab6 applications/popart/bert/configs/mk2/pretrain_large_128.json: sequence 128,
layers [3,7,7,7] with the heads back on IPU 0, LAMB with optimizer state off chip, fp16, half partials,
available memory proportion [0.15,0.25,0.25,0.25], embedding serialisation 5, micro-batch 8). The reference
units below are that configuration's (``IPUPlan.units`` of ``ipuexp.emulator.memory.plan_ipus`` on the BERT-Large
capture); ``tests/emulator/test_memory_recipes.py`` recomputes them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

# IPU optimisation guide Table 4.1 (bytes, whole replica of 4 IPUs): (1 replica, 4 replicas).
TABLE_4_1_CONTROL = (91_668_904, 117_063_756)
TABLE_4_1_INTERNAL_EXCHANGE = (108_270_156, 126_520_640)
TABLE_4_1_HOST_EXCHANGE = (66_044_276, 66_147_360)
TABLE_4_1_GLOBAL_EXCHANGE = (1_035_988, 4_657_516)
TABLE_4_1_REPLICAS = (1, 4)

# Units of the BERT-Large capture in Table 4.1's configuration, summed over the replica's 4 IPUs (fitting
# reference; see the module docstring).
REF_OPS = 173
REF_HOST_TENSORS = 1200
REF_BOUNDARY_TENSORS = 48
REF_PARAMETER_TENSORS = 398

_EXTRA = TABLE_4_1_REPLICAS[1] - TABLE_4_1_REPLICAS[0]

CONTROL_CODE_PER_OP = TABLE_4_1_CONTROL[0] / REF_OPS
"""Fitted: Table 4.1 control code (1 replica) / BERT-Large distinct operations."""
INTERNAL_EXCHANGE_CODE_PER_OP = TABLE_4_1_INTERNAL_EXCHANGE[0] / REF_OPS
"""Fitted: Table 4.1 internal exchange code (1 replica) / BERT-Large distinct operations."""
HOST_EXCHANGE_CODE_PER_TENSOR = TABLE_4_1_HOST_EXCHANGE[0] / REF_HOST_TENSORS
"""Fitted: Table 4.1 host exchange code (1 replica) / BERT-Large host-copied tensors. (The 4-replica figure is
0.16% larger: host exchange code does not grow with replicas.)"""
GLOBAL_EXCHANGE_CODE_PER_BOUNDARY_TENSOR = TABLE_4_1_GLOBAL_EXCHANGE[0] / REF_BOUNDARY_TENSORS
"""Fitted: Table 4.1 global exchange code (1 replica: inter-IPU copies only) / BERT-Large boundary tensors."""
CONTROL_CODE_PER_REPLICATED_TENSOR = (TABLE_4_1_CONTROL[1] - TABLE_4_1_CONTROL[0]) / REF_PARAMETER_TENSORS
"""Fitted: Table 4.1 control-code growth from 1 to 4 replicas / parameter tensors (one-off with replicas)."""
INTERNAL_EXCHANGE_CODE_PER_REPLICATED_TENSOR = (
    (TABLE_4_1_INTERNAL_EXCHANGE[1] - TABLE_4_1_INTERNAL_EXCHANGE[0]) / REF_PARAMETER_TENSORS)
"""Fitted: Table 4.1 internal-exchange growth from 1 to 4 replicas / parameter tensors (one-off with replicas)."""
GLOBAL_EXCHANGE_CODE_PER_REPLICA_TENSOR = (
    (TABLE_4_1_GLOBAL_EXCHANGE[1] - TABLE_4_1_GLOBAL_EXCHANGE[0]) / (_EXTRA * REF_PARAMETER_TENSORS))
"""Fitted: Table 4.1 global-exchange growth from 1 to 4 replicas / (3 extra replicas x parameter tensors)."""

SWITCH_BOUND_ELEMENTS = 96
"""PopLibs ``ReplicatedCollectives.cpp``: a switch case costs ``bytesPerCase = 3 * 4`` bytes and the heuristic
expects ``expectedNumCollectiveCalls = 8``; below 12 x 8 = 96 fragment elements per tile a dynamic slice is
cheaper than the switch."""

SERIALISED_OP_UNITS = 2
"""Extra compute programs of a serialised product: its loop's dynamic slice and dynamic update (see docstring)."""


@dataclass
class CodeUnits:
    """What one IPU's code grows with."""

    ops: int
    """Distinct compute programs after outlining (plus the loop steps of serialised products)."""
    host_tensors: int
    """Tensors copied between the IPU and the host or Streaming Memory."""
    boundary_tensors: int
    """Tensor copies to or from other IPUs of the replica."""
    parameter_tensors: int
    """Parameter tensors on the IPU (cross-replica reductions and sharding)."""
    parameter_elements: int = 0
    """Parameter elements on the IPU (the gradient the collective reduces)."""
    tiles: int = 1472
    """Tiles the gradient is spread over."""


def ring_uses_switch(units: CodeUnits, replicas: int) -> bool:
    """The ring's fragment per tile is large enough for PopLibs to select it with a switch (see the module
    docstring); otherwise a dynamic slice of a sliceable copy of the gradient."""
    if units.parameter_elements <= 0:
        return True
    return units.parameter_elements / (max(units.tiles, 1) * max(replicas, 1)) >= SWITCH_BOUND_ELEMENTS


def ring_positions(units: CodeUnits, replicas: int, training: bool) -> int:
    """Ring positions whose selection code the IPU holds for each parameter tensor: one case per other replica
    with a switch; a single dynamic-slice program otherwise."""
    if not training or replicas <= 1:
        return 0
    return replicas - 1 if ring_uses_switch(units, replicas) else 1


CODE_CATEGORIES = ("control_code", "internal_exchange_code", "host_exchange_code", "global_exchange_code")


def code_bytes(units: CodeUnits, replicas: int, training: bool) -> Dict[str, int]:
    """Bytes of each code category of one IPU."""
    replicated = units.parameter_tensors if training and replicas > 1 else 0
    extra = ring_positions(units, replicas, training) * units.parameter_tensors
    return {
        "control_code": int(CONTROL_CODE_PER_OP * units.ops + CONTROL_CODE_PER_REPLICATED_TENSOR * replicated),
        "internal_exchange_code": int(INTERNAL_EXCHANGE_CODE_PER_OP * units.ops
                                      + INTERNAL_EXCHANGE_CODE_PER_REPLICATED_TENSOR * replicated),
        "host_exchange_code": int(HOST_EXCHANGE_CODE_PER_TENSOR * units.host_tensors),
        "global_exchange_code": int(GLOBAL_EXCHANGE_CODE_PER_BOUNDARY_TENSOR * units.boundary_tensors
                                    + GLOBAL_EXCHANGE_CODE_PER_REPLICA_TENSOR * extra),
    }
