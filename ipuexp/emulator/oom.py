"""Poplar-style out-of-memory report: the fullest tile, the largest categories and ordered remedies.

The first line of each failing IPU is Poplar's own message (IPU optimisation guide section 6.1, "Out of memory
on tile 0: 876476 bytes used but tiles only have 638976 bytes of memory"), with Poplar's tile numbering (tiles of
the replica numbered across its IPUs). Remedies follow IPU optimisation guide section 6.4: reduce the batch size
first, then the not-always-live techniques (recomputation, lower available memory proportion, half partials),
then the always-live ones (offloading optimizer state, replicated tensor sharding, fp16 weights), and splitting
the model over more IPUs last. Only remedies that apply to the configuration are printed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence

from ipuexp.config.schema import option_value
from ipuexp.execution.execution import ExecutionPlan

BATCH_CATEGORIES = ("stash", "activations", "temporary", "host_io_buffers")
"""Categories that scale with the micro-batch (IPU optimisation guide section 3.4.4)."""


def human(n: float) -> str:
    """Bytes in binary units, as PopVision prints them."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


@dataclass
class FailingIPU:
    """What the report needs to know about an IPU that does not fit."""

    ipu: int
    tile: int
    """Poplar tile number of the fullest tile."""
    tile_bytes: int
    tile_memory: int
    breakdown: Dict[str, int]
    amp: float
    layers: int
    """Layer blocks on the IPU."""
    io_overflow: bool
    """The IO tiles cannot hold their stream buffers."""
    io_buffer_bytes: int
    io_buffer_limit: int


def oom_lines(failing: Sequence[FailingIPU], plan: ExecutionPlan) -> List[str]:
    """Report lines for the IPUs that do not fit (empty when all fit)."""
    if not failing:
        return []
    lines: List[str] = []
    for f in failing:
        lines.append(f"Out of memory on tile {f.tile}: {f.tile_bytes} bytes used but tiles only have "
                     f"{f.tile_memory} bytes of memory")
        top = sorted(((v, k) for k, v in f.breakdown.items() if v > 0), reverse=True)[:3]
        total = sum(f.breakdown.values())
        largest = ", ".join(f"{k} {human(v)}" for v, k in top)
        lines.append(f"  IPU {f.ipu}: {human(total)} in total; largest: {largest}")
        if f.io_overflow:
            lines.append(f"  IPU {f.ipu}: IO-tile stream buffers need {f.io_buffer_bytes} bytes per IO tile but "
                         f"options.io.io_tiles_available_memory_proportion allows {f.io_buffer_limit}")
    lines.append("Remedies, in the order the IPU optimisation guide tries them (section 6.4):")
    lines += [f"  {i}. {r}" for i, r in enumerate(_remedies(failing, plan), 1)]
    return lines


def _sum(failing: Sequence[FailingIPU], category: str) -> int:
    return max(f.breakdown.get(category, 0) for f in failing)


def _remedies(failing: Sequence[FailingIPU], plan: ExecutionPlan) -> List[str]:
    opts = plan.options
    loc = opts.tensor_locations
    out: List[str] = []
    if any(f.io_overflow for f in failing):
        out.append(f"raise options.io.num_io_tiles (now {opts.io.num_io_tiles}): IO tiles must hold a whole "
                   "micro-batch, N_IO ~ 1.05 x micro-batch bytes / tile memory (IPU optimisation guide section "
                   "4.4.2)")
    mbs = plan.micro_batch_size
    batch = max(sum(f.breakdown.get(c, 0) for c in BATCH_CATEGORIES) for f in failing)
    if mbs > 1 and batch > 0:
        out.append(f"reduce data.micro_batch_size (now {mbs}): stash, activations, temporaries and host buffers "
                   f"({human(batch)} on the fullest IPU) scale with it (IPU optimisation guide section 5.6)")
    stash = _sum(failing, "stash")
    mode = option_value(opts.recomputation.mode)
    if plan.training and not plan.recompute:
        target = "pipeline" if len(opts.pipeline.layers_per_ipu) > 1 else "all"
        out.append(f"enable recomputation, options.recomputation.mode={target} (now {mode}) with "
                   "options.recomputation.checkpoint_every_layer=true: the stash holds every activation saved for "
                   f"backward ({human(stash)}); with recomputation only checkpoints are stashed and one layer at a "
                   "time is recomputed (IPU optimisation guide section 5.3)")
    elif plan.training and not opts.recomputation.checkpoint_every_layer and _sum(failing, "activations") > 0:
        out.append("set options.recomputation.checkpoint_every_layer=true: a stage then recomputes one layer at a "
                   f"time instead of all its activations ({human(_sum(failing, 'activations'))} live at the peak; "
                   "IPU optimisation guide section 5.3.2)")
    opt = _sum(failing, "optimizer_state")
    if opt > 0 and loc.optimizer_state.on_chip:
        out.append(f"offload the optimizer state, options.tensor_locations.optimizer_state.on_chip=false: frees "
                   f"{human(opt)} (IPU optimisation guide section 5.4)")
    temp = _sum(failing, "temporary")
    if temp > 0:
        amps = ", ".join(f"IPU {f.ipu}: {f.amp:g}" for f in failing)
        out.append(f"lower options.available_memory_proportion ({amps}): it bounds the {human(temp)} of matmul and "
                   "convolution temporaries (IPU optimisation guide section 5.1)")
        if option_value(opts.partials_type) == "float":
            out.append("use half partials, options.partials_type=half: halves the partials of matmuls and "
                       "convolutions (IPU optimisation guide section 5.2)")
    replicas = opts.replication_factor
    sharded = {"optimizer_state": loc.optimizer_state, "gradient_accumulators": loc.accumulators,
               "weights": loc.weights}
    for cat, setting in sharded.items():
        b = _sum(failing, cat)
        if b > 0 and not setting.replicated_tensor_sharding:
            key = "accumulators" if cat == "gradient_accumulators" else cat
            if replicas > 1:
                out.append(f"shard the {cat.replace('_', ' ')} across the {replicas} replicas, "
                           f"options.tensor_locations.{key}.replicated_tensor_sharding=true: keeps "
                           f"{human(b / replicas)} of {human(b)} (IPU optimisation guide section 4.7)")
            break
    if str(opts.precision).endswith("32") and _sum(failing, "weights") > 0:
        out.append(f"store weights in fp16, options.precision=16.16 (now {opts.precision}; IPU optimisation guide "
                   "section 6.4.2)")
    layers = ", ".join(f"IPU {f.ipu} holds {f.layers} layers" for f in failing)
    out.append(f"split the model over more IPUs, options.pipeline.layers_per_ipu ({layers}; IPU optimisation guide "
               "section 6.4)")
    return out

