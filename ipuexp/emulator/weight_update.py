"""The optimizer's step on one IPU: a memory-bound pass over weights, gradients and optimizer states, and the
streaming of what lives off chip (IPU optimisation guide section 5.4)."""
from __future__ import annotations

from ipuexp.config.schema import option_value
from ipuexp.emulator.collectives import streaming_s
from ipuexp.emulator.cost import vector_cycles
from ipuexp.emulator.variables import OPTIMIZER_STATES, state_bytes
from ipuexp.execution.execution import ExecutionPlan
from ipuexp.execution.hardware import TileContext

# Extra passes over weight and update for the layer-wise trust ratio (LAMB, LARS compute norms of both before
# scaling the step).
_NORM_PASSES = {"lamb": 2, "lars": 2}
# Supersteps of the update of one parameter tensor: one per dependent pass of the optimizer's formula; LAMB and
# LARS add a cross-tile reduction of each norm and the trust ratio before scaling the step (LAMB, You et al. 2019;
# LARS, You et al. 2017; each norm is a PopLibs reduce: a partials superstep and a final one).
OPTIMIZER_SUPERSTEPS = {"sgd": 1, "sgd_momentum": 2, "adam": 3, "adamw": 3, "lamb": 7, "lars": 6}


def weight_update_s(plan: ExecutionPlan, params: int, tensors: int, ctx: TileContext) -> float:
    """Optimizer step on one IPU: a memory-bound pass over weights, gradients and states (sharded by RTS),
    plus streaming of off-chip optimizer state in and out (IPU optimisation guide section 5.4)."""
    opts, r = plan.options, plan.rates
    pb = plan.precision
    name = option_value(plan.optimizer.name)
    # State bytes per parameter, as the memory model holds them (half: first moment fp16, second fp32).
    first, second = state_bytes(name, str(plan.optimizer.state_precision)) if name in OPTIMIZER_STATES else (0, 0)
    rts = opts.tensor_locations.optimizer_state.replicated_tensor_sharding and opts.replication_factor > 1
    shard = params / opts.replication_factor if rts else float(params)
    # Read and write the weight (plus the trust-ratio norm passes), read the accumulated gradient, read and write
    # each state tensor.
    per_param = (2 + _NORM_PASSES.get(name, 0)) * pb.weight + pb.weight + 2 * (first + second)
    cycles = vector_cycles(shard * per_param, ctx, supersteps=OPTIMIZER_SUPERSTEPS.get(name, 2) * max(tensors, 1))
    seconds = cycles.total / r.clock_hz
    if not opts.tensor_locations.optimizer_state.on_chip:
        seconds += streaming_s(2.0 * shard * (first + second), r.streaming_memory_bytes_per_s)
    if not opts.tensor_locations.weights.on_chip:
        seconds += streaming_s(2.0 * shard * pb.weight, r.streaming_memory_bytes_per_s)
    return seconds
