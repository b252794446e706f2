"""What the pipeline simulation (``emulator.pipeline``) takes and gives: each stage's work per micro-batch, the step's
pipeline, and its time with each IPU's busy seconds and, when asked, its events."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ipuexp.emulator.events import Event, EventRows

CATEGORIES = ("compute", "recompute", "exchange", "host_io")


@dataclass(frozen=True)
class StageWork:
    """Seconds per micro-batch of one pipeline stage."""

    stage: int
    ipu: int
    fwd_compute: float
    fwd_exchange: float
    bwd_compute: float = 0.0
    bwd_exchange: float = 0.0
    recompute: float = 0.0
    """Forward recomputed before this stage's backward."""
    send_fwd_bytes: float = 0.0
    """Activations sent to the next stage per micro-batch."""
    send_bwd_bytes: float = 0.0
    """Gradients sent to the previous stage per micro-batch."""


@dataclass(frozen=True)
class PipelineSpec:
    stages: Tuple[StageWork, ...]
    schedule: str
    """grouped, interleaved or sequential."""
    micro_batches: int
    training: bool
    link_bytes_per_s: float
    """IPU-to-IPU copy bandwidth."""
    sync_s: float
    """Synchronisation across IPUs at the end of each pipeline cycle (multi-IPU only)."""
    io_s: float = 0.0
    """Host-to-IPU transfer of one micro-batch's input, into stage 0's IPU."""
    io_overlap: bool = False
    """True when IO tiles stream the next input while the compute tiles work."""
    io_exposed_s: float = 0.0
    """Per micro-batch IO time on stage 0's IPU that never overlaps (handshake, IO-tile to compute-tile copy)."""
    host_period_s: float = 0.0
    """Host time to prepare one micro-batch for all replicas its process serves: a cycle that starts a
    micro-batch cannot be shorter (a host-bound pipeline)."""


@dataclass
class PipelineResult:
    time_s: float
    cycles: int
    busy: Dict[int, Dict[str, float]]
    """Seconds per IPU per category (compute, recompute, exchange, host_io)."""
    events: List[Event] = field(default_factory=list)
    rows: Optional[EventRows] = None
    """The events as columns (``simulate_rows``)."""
