"""Not-always-live memory of one IPU: what each program step holds, by category.

The steps of one IPU are, for each of its pipeline stages, the forward pass of each block, then in reverse the
backward pass of each block (preceded by the recomputation of its checkpoint segment when recomputation is on),
then the weight update. A tensor that one block passes to the next and both save for backward
(``emulator.stash.shared_saved_bytes``) is held once on the IPU, in a stash entry and in a recomputed segment
alike.
"""
from __future__ import annotations

from functools import lru_cache
from itertools import accumulate
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from ipuexp.emulator.code_size import CodeUnits, ring_uses_switch
from ipuexp.emulator.memory_inputs import MemorySettings
from ipuexp.emulator.stash import Held, StageStash, own_saved_bytes, saved_bytes, segment_starts, unpipelined_held
from ipuexp.graph.types import BlockCapture, BlockKey
from ipuexp.execution.precision import float_elements, tensor_bytes

class LivenessStep(NamedTuple):
    """Bytes live at one program step of one IPU."""

    label: str
    always_live: int
    not_always_live: int

Steps = Tuple[Tuple[str, Dict[str, int]], ...]


def program_steps(stage_keys: Tuple[Tuple[BlockKey, ...], ...], names: Tuple[str, ...], s: MemorySettings,
                  recompute: bool, pipelined: bool, temps: Tuple[int, ...], stashes: Sequence[StageStash],
                  weights_streamed: bool, acc_streamed: bool, opt_streamed: int, largest: int) -> Tuple[Steps, int]:
    """Not-always-live bytes by category at each program step of one IPU, and the index of its peak step (the first
    of the largest total). ``stage_keys``: the IPU's stages' blocks (``BlockCapture.key``), ``names`` their names;
    ``temps``: each block's forward and backward temporaries, in order; ``pipelined``: more than one stage in the
    graph (else a training stage holds its checkpoints or saved activations itself, ``stash.unpipelined_held``).
    Planners and sweeps meet the same IPU again and again, so the steps are cached: read them, never change them."""
    offchip = not s.locations.activations.on_chip
    return _steps(stage_keys, names, s.act, s.weight, s.training, s.accumulate, s.every_layer, offchip, pipelined,
                  s.replicas, s.tiles, recompute, temps,
                  tuple(x.entry_bytes for x in stashes) if s.training and offchip else (), weights_streamed,
                  acc_streamed, opt_streamed, largest)


@lru_cache(maxsize=4096)
def _steps(stage_keys: Tuple[Tuple[BlockKey, ...], ...], names: Tuple[str, ...], act: int, wb: int, training: bool,
           accumulates: bool, every_layer: bool, offchip_acts: bool, pipelined: bool, replicas: int, tiles: int,
           recompute: bool, temps: Tuple[int, ...], entries: Tuple[int, ...], weights_streamed: bool,
           acc_streamed: bool, opt_streamed: int, largest: int) -> Tuple[Steps, int]:
    own = [[k.block for k in keys] for keys in stage_keys]
    held: Optional[Held] = None
    if training and not offchip_acts and not pipelined:
        held = unpipelined_held(own[0], recompute, every_layer, act)
    steps: List[Tuple[str, Dict[str, int]]] = []
    # Block j of the IPU (stages in order): its name, forward and backward temporaries.
    first = list(accumulate((len(blocks) for blocks in own), initial=0))

    def streamed_weights(b: BlockCapture) -> int:
        return (b.parameters + b.tied_parameters) * wb if weights_streamed else 0

    for n, blocks in enumerate(own):
        for i, b in enumerate(blocks):
            j = first[n] + i
            working = b.peak_fwd_elements * act
            if training and not recompute:
                # Saved activations go straight into the stash (a FIFO, or held until the backward pass).
                working = max(working - b.saved_elements * act, tensor_bytes(b.outputs, act))
            steps.append((f"fwd {names[j]}", {"activations": working, "temporary": temps[2 * j],
                                              "streamed": streamed_weights(b), "stash": held.fwd[i] if held else 0}))
    if not training:
        return _with_peak(steps)

    grads = 0  # weight gradients waiting for the update (no accumulators)
    for n in reversed(range(len(own))):
        blocks = own[n]
        entry = entries[n] if offchip_acts else 0
        starts = segment_starts(blocks, every_layer) if recompute else list(range(len(blocks)))
        bounds = list(zip(starts, starts[1:] + [len(blocks)]))
        for lo, hi in reversed(bounds):
            seg = blocks[lo:hi]
            live = 0
            # What each recomputed block adds to the live set: its saved tensors less those the block before it
            # in the segment already holds (the tensor passed between them, saved by both).
            adds = [own_saved_bytes(seg, i, act) for i in range(len(seg))]
            if recompute:
                for i, (b, add) in enumerate(zip(seg, adds), start=lo):
                    # The block's forward peak counts its input, which the live set already holds when shared.
                    shared = saved_bytes(b, act) - add
                    steps.append((f"recompute {names[first[n] + i]}", {
                        "activations": live - shared + b.peak_fwd_elements * act,
                        "temporary": temps[2 * (first[n] + i)], "gradients": grads,
                        "streamed": entry + streamed_weights(b), "stash": held.recompute[i] if held else 0}))
                    live += add
            for i, b, add in zip(reversed(range(lo, hi)), reversed(seg), reversed(adds)):
                io = (float_elements(b.inputs) + float_elements(b.outputs)) * act
                own_grads = (b.parameters + b.tied_parameters) * act
                if accumulates:
                    transient = b.largest_parameter * act
                else:
                    grads += own_grads
                    transient = 0
                stream = streamed_weights(b) + (b.parameters * wb if acc_streamed else 0)
                if offchip_acts:
                    stream += entry if recompute else saved_bytes(b, act)
                steps.append((f"bwd {names[first[n] + i]}", {"activations": live + io,
                                                              "temporary": temps[2 * (first[n] + i) + 1],
                                                              "gradients": grads + transient, "streamed": stream,
                                                              "stash": held.bwd[i] if held else 0}))
                if recompute:
                    live -= add
    # Weight update, one tensor at a time: its update is computed in an fp32 temporary (4 bytes per element; fp16
    # weights are updated from fp32 arithmetic), its optimizer state streamed in when it lives off chip.
    update_stream = opt_streamed + (largest * wb if weights_streamed else 0) + (largest * wb if acc_streamed else 0)
    # The gradient all-reduce runs before the update: with a dynamic-slice ring (fragment per tile below PopLibs'
    # switch bound) the gradient is first copied into a sliceable tensor (emulator.code_size.ring_uses_switch).
    params = sum(b.parameters for blocks in own for b in blocks)
    ring = CodeUnits(0, 0, 0, 0, parameter_elements=params, tiles=tiles)
    sliceable = params * wb if training and replicas > 1 and not ring_uses_switch(ring, replicas) else 0
    steps.append(("weight update", {"gradients": grads, "temporary": max(largest * 4, sliceable),
                                    "streamed": update_stream}))
    return _with_peak(steps)


def _with_peak(steps: List[Tuple[str, Dict[str, int]]]) -> Tuple[Steps, int]:
    totals = [sum(d.values()) for _, d in steps]
    return tuple(steps), max(range(len(totals)), key=totals.__getitem__) if totals else -1
