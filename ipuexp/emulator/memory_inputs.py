"""What the memory model reads: the configuration values of a plan, resolved once, and each block's planner
temporaries and outlined code keys (``emulator.memory``)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple, Set, Tuple

from ipuexp.config.schema import option_value
from ipuexp.emulator.code_size import SERIALISED_OP_UNITS
from ipuexp.emulator.temporary import matmul_temporary
from ipuexp.emulator.variables import OPTIMIZER_STATES, state_bytes
from ipuexp.graph.types import BlockCapture, BlockKey
from ipuexp.execution.execution import ExecutionPlan
from ipuexp.execution.precision import IO_PRECISION_BYTES

STASH_BYTES = {"half": 2, "float8": 1}
"""Bytes per stashed element of ``options.stash_precision`` (null: the activation precision)."""

class Location(NamedTuple):
    """One category's ``options.tensor_locations`` entry, as plain (hashable) values."""

    on_chip: Any
    replicated_tensor_sharding: Any
    min_elements_for_off_chip: Any
    min_elements_for_replicated_tensor_sharding: Any


class Locations(NamedTuple):
    weights: Location
    activations: Location
    optimizer_state: Location
    accumulators: Location


@dataclass(frozen=True)
class MemorySettings:
    """The configuration values the model reads, resolved once per call (hashable: IPU plans are cached on it)."""

    training: bool
    act: int
    stash: int
    """Bytes per float element a pipeline stage stashes (``options.stash_precision``, else ``act``)."""
    weight: int
    replicas: int
    accumulate: bool
    schedule: str
    recompute_mode: str
    every_layer: bool
    first_state: int
    second_state: int
    state_tensors: int
    locations: Locations
    tiles: int
    tile_memory: int
    io_tiles: int
    io_proportion: float
    prefetch: int
    synthetic: bool
    io_float_bytes: int
    serialisation: int

def memory_settings(plan: ExecutionPlan) -> MemorySettings:
    opts = plan.options
    prec = plan.precision
    optimizer = option_value(plan.optimizer.name)
    first, second = state_bytes(optimizer, option_value(plan.optimizer.state_precision))
    io_precision = str(plan.data.io_precision)
    return MemorySettings(
        training=plan.training, act=prec.activation, weight=prec.weight,
        stash=STASH_BYTES.get(str(opts.stash_precision), prec.activation),
        replicas=int(opts.replication_factor),
        accumulate=int(opts.gradient_accumulation) > 1, schedule=option_value(opts.pipeline.schedule),
        recompute_mode=option_value(opts.recomputation.mode),
        every_layer=bool(opts.recomputation.checkpoint_every_layer),
        first_state=first, second_state=second, state_tensors=sum(OPTIMIZER_STATES[optimizer]),
        locations=_locations(opts.tensor_locations), tiles=int(plan.ipu.tiles),
        tile_memory=int(plan.ipu.memory_per_tile_bytes),
        io_tiles=int(opts.io.num_io_tiles), io_proportion=float(opts.io.io_tiles_available_memory_proportion),
        prefetch=max(int(opts.io.prefetch_depth), 1), synthetic=bool(opts.synthetic_data),
        io_float_bytes=IO_PRECISION_BYTES.get(io_precision, prec.activation),
        serialisation=max(int(opts.embedding_serialization_factor), 1),
    )


def _locations(tl: Any) -> Locations:
    return Locations(*(Location(c.on_chip, c.replicated_tensor_sharding, c.min_elements_for_off_chip,
                                c.min_elements_for_replicated_tensor_sharding)
                       for c in (tl.weights, tl.activations, tl.optimizer_state, tl.accumulators)))

@dataclass
class BlockFigures:
    """Per-block aggregates for one IPU (identical blocks share them)."""

    temp_fwd: int
    temp_bwd: int
    code_keys: Set[Tuple[Any, ...]]
    serialised: Set[Tuple[Any, ...]]

def block_figures(b: BlockCapture, training: bool, serialisation: int, ctx: Any, vocab: int) -> BlockFigures:
    """One pass over a block's records: planner temporaries (``ctx``: the IPU's ``TileContext``; ``serialisation``:
    ``MemorySettings.serialisation``) and outlined code keys."""
    temp = {"fwd": 0, "bwd": 0}
    keys: Set[Tuple[Any, ...]] = set()
    serialised: Set[Tuple[Any, ...]] = set()
    for r in b.ops:
        if r.phase == "bwd" and not training:
            continue
        count = max(r.count, 1)
        key = (r.op, r.phase, tuple(r.matmul_shape) if r.matmul_shape else None, r.elements_read // count,
               r.elements_written // count)
        if r.elements_read or r.elements_written:  # views and reshapes emit no code
            keys.add(key)
        if r.matmul_shape and r.kind in ("matmul", "conv"):
            t = matmul_temporary(r, ctx, vocab, serialisation)
            temp[r.phase] = max(temp[r.phase], t.bytes)
            if t.serial_pieces > 1:
                serialised.add(key)
    return BlockFigures(temp_fwd=temp["fwd"], temp_bwd=temp["bwd"], code_keys=keys, serialised=serialised)


@lru_cache(maxsize=8192)
def ipu_figures(keys: Tuple[BlockKey, ...], ctx: Any, training: bool, serialisation: int,
                vocab: int) -> Tuple[Tuple[int, ...], int]:
    """The blocks of one IPU (in order): each one's forward and backward temporaries, flat, and the code units of
    their distinct operations (outlined code is shared by identical operations, serialised ones add their loop)."""
    figs = [_figures(k, ctx, training, serialisation, vocab) for k in keys]
    code: Set[Tuple[Any, ...]] = set()
    serial: Set[Tuple[Any, ...]] = set()
    for f in {id(f): f for f in figs}.values():
        code |= f.code_keys
        serial |= f.serialised
    return tuple(t for f in figs for t in (f.temp_fwd, f.temp_bwd)), len(code) + SERIALISED_OP_UNITS * len(serial)


@lru_cache(maxsize=8192)
def _figures(key: BlockKey, ctx: Any, training: bool, serialisation: int, vocab: int) -> BlockFigures:
    return block_figures(key.block, training, serialisation, ctx, vocab)
