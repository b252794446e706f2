"""The ``options`` and ``optimizer`` nodes of the configuration: how the IPUs run the model.

Option names follow PopTorch's ``poptorch.Options`` and TensorFlow's ``IPUConfig`` (the PopTorch user guide, PopART
SessionOptions, TF IPUConfig and PopLibs in ``docs/sources.md``) so that a user can carry settings over unchanged.
Defaults are the frameworks' defaults unless stated.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, List, Optional


def option_value(x: Any) -> str:
    """An option as its string: an enum member's value, anything else as given."""
    return str(getattr(x, "value", x))


class PartialsType(str, Enum):
    half = "half"
    float = "float"


class Precision(str, Enum):
    """Graphcore's X.Y notation: activation/gradient bits . weight (master) bits."""

    p16_16 = "16.16"
    p16_32 = "16.32"
    p32_32 = "32.32"


class RecomputationMode(str, Enum):
    none = "none"
    pipeline = "pipeline"
    all = "all"


class Schedule(str, Enum):
    grouped = "grouped"
    interleaved = "interleaved"
    sequential = "sequential"


TENSORFLOW_SCHEDULES = ("grouped", "interleaved", "sequential")
"""TensorFlow for IPU's ``PipelineSchedule`` (Grouped, Interleaved, Sequential; TF2 IPU guide, "Model parallelism")."""
POPART_SCHEDULES = ("grouped", "sequential")
"""What PopTorch and PopART run: ``PipelinedExecution`` (PopART's pipeline, forwards and backwards of every stage in
each cycle: grouped) and ``ShardedExecution`` (one stage at a time: sequential). Neither has an interleaved
schedule (PopTorch user guide, "Multi-IPU execution strategies"; PopART ``SessionOptions``)."""


def schedules_for(framework: Any) -> tuple:
    """The pipeline schedules a host framework (``host.framework``) can run."""
    return TENSORFLOW_SCHEDULES if option_value(framework) == "tensorflow" else POPART_SCHEDULES


class AutoStage(str, Enum):
    same_as_ipu = "same_as_ipu"
    auto_increment = "auto_increment"


class OutputMode(str, Enum):
    default = "default"
    final = "final"
    all = "all"
    sum = "sum"


class ReductionType(str, Enum):
    mean = "mean"
    sum = "sum"



class Optimizer(str, Enum):
    sgd = "sgd"
    sgd_momentum = "sgd_momentum"
    adam = "adam"
    adamw = "adamw"
    lamb = "lamb"
    lars = "lars"


@dataclass
class RecomputationConfig:
    mode: RecomputationMode = RecomputationMode.pipeline
    """none, pipeline (PopTorch's default with >1 IPU: recompute forward in backward per stage) or all."""
    checkpoint_every_layer: bool = False
    """Insert a recomputation checkpoint at every layer output (``recomputationCheckpoint``)."""


@dataclass
class TensorLocation:
    """``poptorch.TensorLocationSettings`` for one tensor category."""

    on_chip: bool = True
    """Keep the category in IPU SRAM (false: Streaming Memory)."""
    replicated_tensor_sharding: bool = False
    """Shard the category across replicas (RTS)."""
    min_elements_for_off_chip: int = 2
    """Tensors smaller than this stay on chip (PopART default 2)."""
    min_elements_for_replicated_tensor_sharding: int = 8192
    """Tensors smaller than this are not sharded (PopART default 8192)."""


@dataclass
class TensorLocations:
    weights: TensorLocation = field(default_factory=TensorLocation)
    """Where weights live."""
    activations: TensorLocation = field(default_factory=TensorLocation)
    """Where stashed activations live."""
    optimizer_state: TensorLocation = field(default_factory=TensorLocation)
    """Where optimizer state (momenta, variances) lives."""
    accumulators: TensorLocation = field(default_factory=TensorLocation)
    """Where gradient accumulators live."""


@dataclass
class IOConfig:
    num_io_tiles: int = 0
    """Tiles reserved for host IO (0, or even in [32, 192]; ``TensorLocations.numIOTiles``)."""
    prefetch_depth: int = 1
    """Input buffering depth (PopART ``defaultBufferingDepth``)."""
    io_tiles_available_memory_proportion: float = 0.9
    """Share of IO-tile memory usable for stream buffers (IPUConfig ``io_tiles.available_memory_proportion``)."""


@dataclass
class PipelineConfig:
    schedule: Schedule = Schedule.grouped
    """grouped (default: PopTorch's PipelinedExecution), sequential (ShardedExecution) or interleaved (TensorFlow's
    only: with host.framework=tensorflow)."""
    layers_per_ipu: List[int] = field(default_factory=list)
    """Layers in each pipeline stage, in order (halves of layers with ``split_layers``); empty means the whole model
    on one IPU."""
    device_mapping: Optional[List[int]] = None
    """IPU of each stage; one extra entry places the post-layer blocks (heads) in a stage of their own,
    e.g. BERT's [0,1,2,3,0]. Default: stage i on IPU i."""
    auto_stage: AutoStage = AutoStage.same_as_ipu
    """PopTorch's ``AutoStage`` for blocks placed by IPU, as the source sets it: ``same_as_ipu`` (default: the
    blocks on one IPU form one stage) or ``auto_increment`` (every block its own stage, as Optimum Graphcore's
    ``PipelinedExecution(AutoStage.AutoIncrement)`` numbers them). Both predict the same: PopART merges consecutive
    stages on one IPU into one (PopTorch user guide, "Pipelined execution"; ``graph.stages``)."""
    split_layers: bool = False
    """Each encoder layer is two blocks, attention then feed-forward, and ``layers_per_ipu`` counts these halves, so
    that a stage can end in the middle of a layer (zoo BERT; Graphcore's MLPerf BERT ``att_ffn_placement``)."""


@dataclass
class OptimizerConfig:
    name: Optimizer = Optimizer.adamw
    """sgd, sgd_momentum, adam, adamw, lamb or lars."""
    learning_rate: float = 1e-3
    """Learning rate."""
    momentum: float = 0.9
    """Momentum (sgd_momentum, lars) or beta1 (adam, adamw, lamb)."""
    weight_decay: float = 0.0
    """Weight decay."""
    state_precision: str = "float"
    """float or half: dtype of optimizer state (``enable_half_first_order_momentum`` and PopART's ``lamb_m_dtype``
    FLOAT16 set half: the first moment in fp16, the second in fp32)."""


@dataclass
class Options:
    """IPU execution options in ``poptorch.Options`` vocabulary."""

    replication_factor: int = 1
    """Data-parallel replicas."""
    gradient_accumulation: int = 1
    """Micro-batches accumulated per weight update (``Training.gradientAccumulation``)."""
    device_iterations: int = 1
    """Weight updates (training) per host call (``deviceIterations``)."""
    inference_device_iterations: Optional[int] = None
    """Device iterations per host call when scoring the held-out split (None: device_iterations)."""
    available_memory_proportion: Any = 0.6
    """Share of tile memory for matmul/conv temporaries: a number, or a list with one value per IPU (PopLibs default 0.6)."""
    partials_type: PartialsType = PartialsType.float
    """Matmul/conv partials type (``Precision.setPartialsType``)."""
    precision: str = "16.16"
    """Activation/gradient . weight precision: "16.16", "16.32" or "32.32" (a str: the values are not identifiers)."""
    stochastic_rounding: bool = False
    """``Precision.enableStochasticRounding``."""
    stash_precision: Optional[str] = None
    """Precision of the activations a pipeline stage stashes for its backward pass: null (the activations' own),
    half or float8 (PopART's MLPerf BERT ``activation_checkpoint_dtype: FLOAT8`` casts them down for the stash)."""
    recomputation: RecomputationConfig = field(default_factory=RecomputationConfig)
    """Recomputation settings."""
    tensor_locations: TensorLocations = field(default_factory=TensorLocations)
    """On-chip/off-chip and RTS settings per tensor category."""
    io: IOConfig = field(default_factory=IOConfig)
    """Host IO settings."""
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    """Pipeline stages and schedule."""
    output_mode: OutputMode = OutputMode.default
    """What returns to the host per step: default (final for training, all for inference), final, all, sum."""
    reduction_type: ReductionType = ReductionType.mean
    """``Training.accumulationAndReplicationReductionType``."""
    loss_scaling: float = 1.0
    """Static loss scale for fp16 training."""
    auto_loss_scaling: bool = False
    """``Training.setAutomaticLossScaling``."""
    auto_round_num_ipus: bool = False
    """``autoRoundNumIPUs``: reserve the next power of two of IPUs when replicas x IPUs per replica is not one (PopART
    acquires 2^n IPUs); the IPUs beyond the model's stay idle."""
    embedding_serialization_factor: int = 1
    """Split the embedding/vocab matmul into this many serial pieces (lowers temporary memory)."""
    executable_cache_dir: Optional[str] = None
    """``enableExecutableCaching(path)``; recorded, no effect on the emulator."""
    enable_stable_norm: bool = False
    """``enableStableNorm``."""
    synthetic_data: bool = False
    """``enableSyntheticData``: no host IO."""
    random_seed: int = 42
    """``randomSeed``."""
    num_instances: int = 1
    """Host processes (PopRun instances); replicas are divided among them."""

