"""Always-live variables of one IPU: weights, gradient accumulators and optimizer state, after tensor locations.

IPU optimisation guide sections 3.4.3-3.4.5: weights, gradients and optimiser states scale with the trainable
parameters and live for the whole program. Options (``poptorch.Options`` in the PopTorch user guide,
``TensorLocationSettings``): a category kept off chip lives in Streaming Memory and occupies the IPU only while
it is streamed in for use (IPU optimisation guide section 5.4, TF2 IPU guide section 5.1.4); replicated tensor
sharding keeps 1/R of each tensor on each of R replicas and gathers the whole tensor when it is used (IPU
optimisation guide section 4.7, TF2 IPU guide section 5.1.3). Tensors smaller than ``min_elements_for_off_chip``
/ ``min_elements_for_replicated_tensor_sharding`` are neither moved nor sharded.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Tuple

OPTIMIZER_STATES: Dict[str, Tuple[int, int]] = {
    # optimizer -> (first-order states, second-order states) per trainable parameter.
    "sgd": (0, 0),           # plain SGD keeps no state
    "sgd_momentum": (1, 0),  # velocity (torch.optim.SGD momentum_buffer)
    "adam": (1, 1),          # first and second moments m, v (IPU optimisation guide section 3.4.3)
    "adamw": (1, 1),         # as Adam; decoupled weight decay adds no state
    "lamb": (1, 1),          # m, v as Adam (IPU optimisation guide section 3.4.3 names Adam and LAMB)
    "lars": (1, 0),          # momentum (You et al. 2017, LARS with momentum)
}


def state_bytes(optimizer: str, state_precision: str) -> Tuple[int, int]:
    """(first-order bytes, second-order bytes) per parameter.

    ``state_precision: half`` is Graphcore's ``enable_half_first_order_momentum``: the first moment in fp16; the
    second moment stays fp32 (BERT ``configs_pretraining.yml`` / optimizer ``second_order_momentum_accum_type``).
    """
    first, second = OPTIMIZER_STATES[optimizer]
    first_bytes = 2 if str(state_precision) == "half" else 4
    return first * first_bytes, second * 4


def elements_at_least(total: int, tensors: int, largest: int, threshold: int) -> int:
    """Elements in tensors of at least ``threshold`` elements, from a block's totals.

    Only the total, the count and the largest tensor are captured, so this is the lower bound: the largest tensor
    qualifies if big enough, and at most ``tensors - 1`` other tensors fall short by ``threshold - 1`` each.
    """
    if largest < threshold or total <= 0:
        return 0
    return total - min(total - largest, max(tensors - 1, 0) * max(threshold - 1, 0))


@dataclass
class Placement:
    """Where one category of variables lives on one IPU."""

    on_chip_bytes: int
    """Always-live bytes in the IPU's SRAM."""
    off_chip_bytes: int
    """Bytes in Streaming Memory."""
    sharded: bool
    """Replicated tensor sharding is in effect."""


def place(elements: int, tensors: int, largest: int, bytes_per_element: float, location: Any,
          replicas: int) -> Placement:
    """Bytes of a category (``elements`` in ``tensors`` tensors) on and off chip under ``location``."""
    total = int(elements * bytes_per_element)
    if total == 0:
        return Placement(0, 0, False)
    moved = 0
    if not location.on_chip:
        moved = elements_at_least(elements, tensors, largest, location.min_elements_for_off_chip)
    sharded = replicas > 1 and location.replicated_tensor_sharding
    shard_elems = 0
    if sharded:
        threshold = location.min_elements_for_replicated_tensor_sharding
        shard_elems = elements_at_least(elements, tensors, largest, threshold)
    # Sharded tensors keep 1/R per replica wherever they live; unsharded ones keep the whole tensor.
    shard_frac = shard_elems / elements
    kept_elems = elements - moved
    on_chip = kept_elems * (1 - shard_frac) + kept_elems * shard_frac / replicas
    off_chip = moved * (1 - shard_frac) + moved * shard_frac / replicas
    return Placement(on_chip_bytes=int(on_chip * bytes_per_element),
                     off_chip_bytes=int(off_chip * bytes_per_element), sharded=sharded and shard_elems > 0)
