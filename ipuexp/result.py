"""The one definition of every output name.

``result.json`` and the console table are rendered from :class:`Result`; a figure gets its name here and nowhere
else. MLflow records the headline figures :mod:`ipuexp.tracking.curated` picks from it, under names short enough
to compare runs by.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class IPUModelFigures:
    """What one IPU of a replica holds and computes, per micro-batch."""

    ipu: int
    stages: List[int]
    blocks: List[str]
    parameters: int
    fwd_flops: int
    bwd_flops: int
    saved_activation_bytes: int
    """Bytes saved for backward per micro-batch at the activation precision (no recomputation)."""
    boundary_out_bytes: int
    """Bytes sent to the next stage per micro-batch."""


@dataclass
class ModelFigures:
    name: str
    parameters: int
    flops_per_sample: float
    """Training FLOPs (forward + backward) per sample; forward only for inference."""
    fwd_flops_per_sample: float
    bwd_flops_per_sample: float
    num_stages: int
    ipus_per_replica: int
    capture_seconds: float
    ipus: List[IPUModelFigures] = field(default_factory=list)


@dataclass
class IPUMemory:
    ipu: int
    capacity_bytes: int
    total_bytes: int
    always_live_bytes: int
    not_always_live_bytes: int
    max_tile_bytes: int
    max_tile: int
    fits: bool
    breakdown: Dict[str, int] = field(default_factory=dict)


@dataclass
class MemoryFigures:
    fits: bool
    ipus: List[IPUMemory]
    report: List[str] = field(default_factory=list)
    """Poplar-style out-of-memory lines and ordered remedies; empty when everything fits."""


@dataclass
class ThroughputFigures:
    samples_per_s: float
    step_time_s: float
    """Time of one weight update (GA micro-batches on every replica)."""
    bubble_fraction: float
    utilisation: List[float]
    """Busy share of the step of each IPU of a replica: computing or exchanging, neither idle nor waiting for the
    host (the pipeline chart's "busy" beside each IPU)."""
    breakdown: Dict[str, float] = field(default_factory=dict)
    """Seconds per step: compute, recompute, exchange, host_io, weight_update, all_reduce, idle."""
    peak_flops_bound_samples_per_s: float = 0.0
    sequences_per_s: Optional[float] = None
    """Packed sequences (``data.packing``): sequences per second, ``samples_per_s`` (packs) times the average
    sequences per pack; None when a sample is one sequence."""
    error_band_pct: Optional[float] = None
    """Error band of ``samples_per_s``, percent: the bound on the prediction's error, predicted / measured - 1,
    either way (``ipuexp.calibration.band_ends``), from the leave-one-out residuals of the calibration rows most
    like this configuration, widened outside the calibration's range (None without calibration residuals)."""
    error_band_reasons: List[str] = field(default_factory=list)
    """What the band rests on and why it was widened, each calibration row named."""
    error_band_summary: List[str] = field(default_factory=list)
    """The same without row ids, as the console prints it."""
    extrapolated: Optional[str] = None
    """The axes on which no calibration row reaches this configuration, with the span the rows cover there
    (``calibration.reach``); None when a row reaches it."""


@dataclass
class FunctionalFigures:
    final_loss: float
    samples_per_s: float
    test_accuracy: Optional[float] = None
    steps: int = 0
    predicted_samples_per_s: Optional[float] = None


@dataclass
class MeasuredFigures:
    """What a real system measured for the configuration (``measured.*``), beside the prediction."""

    samples_per_s: Optional[float] = None
    """Measured samples per second (sequences for packed data)."""
    ipu_memory_bytes: Optional[int] = None
    """Measured memory of the fullest IPU."""
    over_predicted: Optional[float] = None
    """Measured over predicted throughput (the predicted rate in the same unit)."""
    memory_over_predicted: Optional[float] = None
    """Measured over predicted memory of the fullest IPU."""
    in_band: Optional[bool] = None
    """The measured throughput lies inside the prediction's error band."""


@dataclass
class RunFigures:
    """What ran: the batch, the replicas and how many of the system's IPUs they use."""

    micro_batch_size: int
    replicas: int
    ipus_per_replica: int
    gradient_accumulation: int
    device_iterations: int
    system: str
    system_ipus: int
    sequence_length: Optional[int] = None
    """Tokens per sample (a pack, for packed data); None for a model of images or of the user's own."""
    auto_round: bool = False
    """``options.auto_round_num_ipus``: the job reserves the next power of two of IPUs."""

    @property
    def ipus_used(self) -> int:
        return self.replicas * self.ipus_per_replica

    @property
    def ipus_reserved(self) -> int:
        """IPUs the job acquires: those it uses, rounded up to a power of two under ``auto_round``."""
        used = self.ipus_used
        return 1 << (used - 1).bit_length() if self.auto_round and used > 1 else used

    @property
    def global_batch(self) -> int:
        """Samples per weight update."""
        return self.micro_batch_size * self.gradient_accumulation * self.replicas

    def idle_remedy(self) -> Optional[str]:
        """The overrides that put the idle IPUs to work by data parallelism, or None when none idle."""
        fill = self.system_ipus // max(self.ipus_per_replica, 1)
        if fill <= self.replicas:
            return None
        overrides = f"options.replication_factor={fill}"
        if (self.gradient_accumulation * self.replicas) % fill == 0:
            return (f"{overrides} options.gradient_accumulation={self.gradient_accumulation * self.replicas // fill}"
                    f" uses all {fill * self.ipus_per_replica} IPUs at the same global batch")
        return f"{overrides} uses all {fill * self.ipus_per_replica} IPUs (the global batch grows {fill / self.replicas:g}x)"


@dataclass
class Result:
    recipe: Optional[str]
    model: ModelFigures
    fits: Optional[bool] = None
    memory: Optional[MemoryFigures] = None
    throughput: Optional[ThroughputFigures] = None
    functional: Optional[FunctionalFigures] = None
    measured: Optional[MeasuredFigures] = None
    run: Optional[RunFigures] = None
    artifacts: Dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class Skipped:
    """What a job returns instead of a Result when its configuration need not run again."""

    reason: str = "already has a FINISHED run in MLflow"
    samples_per_s: Optional[float] = None
    """The FINISHED run's ``throughput_samples_per_s``, read when an optimisation sweeper needs it."""
    fits: Optional[bool] = None
    """The FINISHED run's ``fits``, read with ``samples_per_s``."""
    metrics: Dict[str, float] = field(default_factory=dict)
    """The FINISHED run's metrics (an optimisation sweeper's objectives), read with ``samples_per_s``."""


class Objective(float):
    """What a job returns to a Hydra optimisation sweeper (``hydra/sweeper=optuna``): its predicted throughput in
    samples/s, which a sweeper that knows nothing else reads as ``float(JobReturn.return_value)``; ``metrics`` holds
    the run's metrics by their MLflow names (ipuexp's sweeper takes its objectives from them) and ``outcome`` the
    job's Result (or Skipped) for the sweep's table."""

    outcome: Any
    metrics: Dict[str, float]

    def __new__(cls, value: float, outcome: Any = None, metrics: Optional[Dict[str, float]] = None) -> "Objective":
        obj = super().__new__(cls, value)
        obj.outcome = outcome
        obj.metrics = dict(metrics or {})
        return obj

    def __reduce__(self) -> Any:
        return (Objective, (float(self), self.outcome, self.metrics))
