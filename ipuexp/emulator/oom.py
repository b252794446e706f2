"""Poplar-style out-of-memory report: the fullest tile, the largest categories and ordered remedies.

The first line of each failing IPU is Poplar's own message (IPU optimisation guide section 6.1, "Out of memory
on tile 0: 876476 bytes used but tiles only have 638976 bytes of memory"), with Poplar's tile numbering (tiles of
the replica numbered across its IPUs). Remedies are those of IPU optimisation guide section 6.4 (the
micro-batch, recomputation, the available memory proportion, half partials, offloading, replicated tensor sharding,
fp16 weights, more IPUs), each with what it would free on the fullest IPU, largest first; one that frees less than a
tenth of the fullest tile's overflow is left out, and more IPUs are named only when the system has IPUs to spare
(else: with fewer replicas). When the remedies together cannot bring an IPU under its capacity, the report says how many IPUs the
model's layers need.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

from ipuexp.config.schema import option_value
from ipuexp.execution.execution import ExecutionPlan
from ipuexp.units import human_bytes as human

MIN_SHARE_OF_OVERFLOW = 0.1
"""A remedy is named when it frees at least this share of the fullest tile's overflow there."""

BATCH_CATEGORIES = ("stash", "activations", "temporary", "host_io_buffers")
"""Categories that scale with the micro-batch (IPU optimisation guide section 3.4.4)."""


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


def oom_lines(failing: Sequence[FailingIPU], plan: ExecutionPlan, capacity: int = 0) -> List[str]:
    """Report lines for the IPUs that do not fit (empty when all fit). ``capacity``: bytes of one IPU, for the
    IPUs a model needs when no option makes it fit."""
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
            lines.append(f"  IPU {f.ipu}: IO-tile stream buffers need {human(f.io_buffer_bytes)} per IO tile but "
                         f"options.io.io_tiles_available_memory_proportion allows {human(f.io_buffer_limit)}")
    remedies = _remedies(failing, plan)
    lines.append("Remedies, the largest saving on the fullest IPU first (IPU optimisation guide section 6.4):")
    lines += [f"  {i}. {text}" for i, (_, text) in enumerate(remedies, 1)]
    if capacity:
        worst = max(failing, key=lambda f: sum(f.breakdown.values()))
        total = sum(worst.breakdown.values())
        left = total - sum(b for b, _ in remedies)
        if left > capacity:
            need = -(-left // capacity)
            lines.append(f"No remedy above fits IPU {worst.ipu}: it keeps about {human(left)} of its {human(total)} "
                         f"after all of them, against {human(capacity)} per IPU; what it holds needs at least {need} "
                         "IPUs (more stages in options.pipeline.layers_per_ipu).")
    return lines


def _sum(failing: Sequence[FailingIPU], category: str) -> int:
    return max(f.breakdown.get(category, 0) for f in failing)


def _remedies(failing: Sequence[FailingIPU], plan: ExecutionPlan) -> List[Tuple[int, str]]:
    """(bytes it frees on the fullest failing IPU, remedy), largest first; a remedy that frees nothing is left
    out. The IO-tile remedy leads when the IO tiles overflow; splitting the model over more IPUs closes the list.
    Savings are estimates from the memory model's categories: a category that scales with the micro-batch falls
    with it, the stash goes with recomputation (checkpoints stay: an upper bound), halving the available memory
    proportion halves the temporaries it bounds, half partials halve the partials among them (a quarter of the
    temporaries is assumed), sharding keeps 1/replicas, fp16 weights halve fp32 ones."""
    opts = plan.options
    loc = opts.tensor_locations
    out: List[Tuple[int, str]] = []
    mbs = plan.micro_batch_size
    batch = max(sum(f.breakdown.get(c, 0) for c in BATCH_CATEGORIES) for f in failing)
    if mbs > 1 and batch > 0:
        out.append((batch * (mbs - 1) // mbs,
                    f"reduce data.micro_batch_size (now {mbs}): stash, activations, temporaries and host buffers "
                    f"({human(batch)} on the fullest IPU) scale with it; micro-batch 1 frees about "
                    f"{human(batch * (mbs - 1) / mbs)} (IPU optimisation guide section 5.6)"))
    stash = _sum(failing, "stash")
    mode = option_value(opts.recomputation.mode)
    acts = _sum(failing, "activations")
    if plan.training and not plan.recompute and stash > 0:
        target = "pipeline" if len(opts.pipeline.layers_per_ipu) > 1 else "all"
        out.append((stash, f"enable recomputation, options.recomputation.mode={target} (now {mode}) with "
                    "options.recomputation.checkpoint_every_layer=true: frees up to the stash of activations saved "
                    f"for backward ({human(stash)}); only checkpoints are stashed and one layer at a time is "
                    "recomputed (IPU optimisation guide section 5.3)"))
    elif plan.training and not opts.recomputation.checkpoint_every_layer and acts > 0:
        layers = max(max(f.layers for f in failing), 1)
        out.append((acts * (layers - 1) // layers,
                    "set options.recomputation.checkpoint_every_layer=true: a stage then recomputes one layer at a "
                    f"time instead of all its activations ({human(acts)} live at the peak; IPU optimisation guide "
                    "section 5.3.2)"))
    opt = _sum(failing, "optimizer_state")
    if opt > 0 and loc.optimizer_state.on_chip:
        out.append((opt, f"offload the optimizer state, options.tensor_locations.optimizer_state.on_chip=false: "
                    f"frees {human(opt)} (IPU optimisation guide section 5.4)"))
    temp = _sum(failing, "temporary")
    if temp > 0:
        amps = ", ".join(f"IPU {f.ipu}: {f.amp:g}" for f in failing)
        out.append((temp // 2, f"lower options.available_memory_proportion ({amps}): it bounds the {human(temp)} of "
                    "matmul and convolution temporaries; half the proportion frees about half (IPU optimisation "
                    "guide section 5.1)"))
        if option_value(opts.partials_type) == "float":
            out.append((temp // 4, "use half partials, options.partials_type=half: halves the partials of matmuls "
                        "and convolutions, part of the temporaries (IPU optimisation guide section 5.2)"))
    replicas = opts.replication_factor
    sharded = {"optimizer_state": loc.optimizer_state, "gradient_accumulators": loc.accumulators,
               "weights": loc.weights}
    for cat, setting in sharded.items():
        b = _sum(failing, cat)
        if b > 0 and not setting.replicated_tensor_sharding and replicas > 1:
            key = "accumulators" if cat == "gradient_accumulators" else cat
            out.append((b - b // replicas, f"shard the {cat.replace('_', ' ')} across the {replicas} replicas, "
                        f"options.tensor_locations.{key}.replicated_tensor_sharding=true: keeps "
                        f"{human(b / replicas)} of {human(b)} (IPU optimisation guide section 4.7)"))
            break
    weights = _sum(failing, "weights")
    if str(opts.precision).endswith("32") and weights > 0:
        out.append((weights // 2, f"store weights in fp16, options.precision=16.16 (now {opts.precision}): frees "
                    f"about {human(weights / 2)} (IPU optimisation guide section 6.4.2)"))
    # A remedy worth naming frees, on the fullest tile, a tenth of what that tile is over at least (its saving on
    # the IPU spread as the fullest tile holds its share of the IPU): one that frees 148 B does not help.
    worst = max(failing, key=lambda f: f.tile_bytes - f.tile_memory)
    over = max(worst.tile_bytes - worst.tile_memory, 0)
    share = worst.tile_bytes / max(sum(worst.breakdown.values()), 1)
    floor = max(1, MIN_SHARE_OF_OVERFLOW * over / max(share, 1e-12))
    out = sorted((r for r in out if r[0] >= floor), key=lambda r: -r[0])
    if any(f.io_overflow for f in failing):
        out.insert(0, (0, f"raise options.io.num_io_tiles (now {opts.io.num_io_tiles}): IO tiles must hold a whole "
                       "micro-batch, N_IO ~ 1.05 x micro-batch bytes / tile memory (IPU optimisation guide section "
                       "4.4.2)"))
    layers = ", ".join(f"IPU {f.ipu} holds {f.layers} layers" for f in failing)
    used = len(plan.ipus) * plan.replicas
    system_ipus = int(plan.system.num_ipus)
    if system_ipus - used >= plan.replicas:  # each replica can take another IPU
        out.append((0, f"split the model over more IPUs, options.pipeline.layers_per_ipu ({layers}; the system "
                    f"has {system_ipus - used} of its {system_ipus} IPUs idle; IPU optimisation guide section 6.4)"))
    elif plan.replicas > 1:
        out.append((0, f"split the model over more IPUs per replica with fewer replicas (all {system_ipus} IPUs of "
                    f"{plan.system.name} are in use): options.replication_factor={plan.replicas // 2} and twice the "
                    f"IPUs in options.pipeline.layers_per_ipu ({layers}; IPU optimisation guide section 6.4)"))
    return out
