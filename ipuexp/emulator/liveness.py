"""Not-always-live memory of one IPU: what each program step holds, by category.

The steps of one IPU are, for each of its pipeline stages, the forward pass of each block, then in reverse the
backward pass of each block (preceded by the recomputation of its checkpoint segment when recomputation is on),
then the weight update. A tensor that one block passes to the next and both save for backward
(``emulator.stash.shared_saved_bytes``) is held once on the IPU, in a stash entry and in a recomputed segment
alike.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Tuple

from ipuexp.emulator.code_size import CodeUnits, ring_uses_switch
from ipuexp.emulator.memory_inputs import BlockFigures, MemorySettings
from ipuexp.emulator.stash import Held, StageStash, own_saved_bytes, saved_bytes, segment_starts
from ipuexp.graph.types import BlockCapture, Stage
from ipuexp.execution.precision import float_elements, tensor_bytes

class LivenessStep(NamedTuple):
    """Bytes live at one program step of one IPU."""

    label: str
    always_live: int
    not_always_live: int

def program_steps(own: List[Stage], s: MemorySettings, recompute: bool, block_figs: Dict[int, BlockFigures],
                  stashes: List[StageStash], held: Optional[Held], weights_streamed: bool, acc_streamed: bool,
                  opt_streamed: int, largest: int) -> List[Tuple[str, Dict[str, int]]]:
    """Not-always-live bytes by category at each program step of one IPU (``held``: the kept tensors of an
    unpipelined stage, by block index)."""
    act, wb = s.act, s.weight
    steps: List[Tuple[str, Dict[str, int]]] = []

    def streamed_weights(b: BlockCapture) -> int:
        return (b.parameters + b.tied_parameters) * wb if weights_streamed else 0

    for st in own:
        for i, b in enumerate(st.blocks):
            working = b.peak_fwd_elements * act
            if s.training and not recompute:
                # Saved activations go straight into the stash (a FIFO, or held until the backward pass).
                working = max(working - b.saved_elements * act, tensor_bytes(b.outputs, act))
            steps.append((f"fwd {b.name}", {"activations": working, "temporary": block_figs[id(b)].temp_fwd,
                                             "streamed": streamed_weights(b), "stash": held.fwd[i] if held else 0}))
    if not s.training:
        return steps

    grads = 0  # weight gradients waiting for the update (no accumulators)
    stash_of = {id(st): x for st, x in zip(own, stashes)}
    offchip_acts = not s.locations.activations.on_chip
    for st in reversed(own):
        blocks = st.blocks
        entry = stash_of[id(st)].entry_bytes if offchip_acts else 0
        starts = segment_starts(blocks, s.every_layer) if recompute else list(range(len(blocks)))
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
                    steps.append((f"recompute {b.name}", {
                        "activations": live - shared + b.peak_fwd_elements * act,
                        "temporary": block_figs[id(b)].temp_fwd, "gradients": grads,
                        "streamed": entry + streamed_weights(b), "stash": held.recompute[i] if held else 0}))
                    live += add
            for i, b, add in zip(reversed(range(lo, hi)), reversed(seg), reversed(adds)):
                io = (float_elements(b.inputs) + float_elements(b.outputs)) * act
                own_grads = (b.parameters + b.tied_parameters) * act
                if s.accumulate:
                    transient = b.largest_parameter * act
                else:
                    grads += own_grads
                    transient = 0
                stream = streamed_weights(b) + (b.parameters * wb if acc_streamed else 0)
                if offchip_acts:
                    stream += entry if recompute else saved_bytes(b, act)
                steps.append((f"bwd {b.name}", {"activations": live + io, "temporary": block_figs[id(b)].temp_bwd,
                                                "gradients": grads + transient, "streamed": stream,
                                                "stash": held.bwd[i] if held else 0}))
                if recompute:
                    live -= add
    # Weight update, one tensor at a time: its update is computed in an fp32 temporary (4 bytes per element; fp16
    # weights are updated from fp32 arithmetic), its optimizer state streamed in when it lives off chip.
    update_stream = opt_streamed + (largest * wb if weights_streamed else 0) + (largest * wb if acc_streamed else 0)
    # The gradient all-reduce runs before the update: with a dynamic-slice ring (fragment per tile below PopLibs'
    # switch bound) the gradient is first copied into a sliceable tensor (emulator.code_size.ring_uses_switch).
    params = sum(st.parameters for st in own)
    ring = CodeUnits(0, 0, 0, 0, parameter_elements=params, tiles=s.tiles)
    sliceable = params * wb if s.training and s.replicas > 1 and not ring_uses_switch(ring, s.replicas) else 0
    steps.append(("weight update", {"gradients": grads, "temporary": max(largest * 4, sliceable),
                                    "streamed": update_stream}))
    return steps

