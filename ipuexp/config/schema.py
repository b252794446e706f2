"""Typed experiment configuration.

Option names follow PopTorch's ``poptorch.Options`` and TensorFlow's ``IPUConfig`` (the PopTorch user guide, PopART
SessionOptions, TF IPUConfig and PopLibs in ``docs/sources.md``) so that a user can carry settings over unchanged.
Defaults are the frameworks' defaults unless stated.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, List, Optional

from ipuexp.data.spec import DataConfig  # noqa: F401  (the parts of the schema their layers own)
from ipuexp.models.spec import HFModelConfig, ModelConfig  # noqa: F401


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


class EngineMode(str, Enum):
    analytic = "analytic"
    functional = "functional"


class Optimizer(str, Enum):
    sgd = "sgd"
    sgd_momentum = "sgd_momentum"
    adam = "adam"
    adamw = "adamw"
    lamb = "lamb"
    lars = "lars"


@dataclass
class IPUHardware:
    """One IPU generation (config group ``ipu``). Every figure carries its source in ``conf/ipu/*.yaml``."""

    name: str = "mk2"
    """Generation name: mk1, mk2 or bow."""
    tiles: int = 1472
    """Tiles (cores) per IPU."""
    workers_per_tile: int = 6
    """Hardware worker threads per tile."""
    memory_per_tile_bytes: int = 638976
    """SRAM per tile in bytes."""
    clock_hz: float = 1.33e9
    """Tile clock frequency."""
    flops_per_cycle_per_tile_fp16: float = 128.0
    """Peak AMP FLOPs per cycle per tile with fp16 inputs and fp16 partials."""
    flops_per_cycle_per_tile_fp32: float = 32.0
    """Peak AMP FLOPs per cycle per tile with fp32 inputs."""
    tile_memory_bytes_per_cycle: float = 24.0
    """Bytes a tile can load/store per cycle from its own SRAM (aggregate bandwidth / tiles / clock)."""
    exchange_bytes_per_s: float = 8.0e12
    """On-chip tile-to-tile exchange bandwidth per IPU."""
    ipu_link_bytes_per_s: float = 320.0e9
    """Total IPU-Link bandwidth per IPU (all links), per direction."""
    ipu_links: int = 10
    """Number of IPU-Links per IPU."""
    host_link_bytes_per_s: float = 64.0e9
    """Host link bandwidth (PCIe Gen4 x16 or RoCE via the gateway) per IPU-Machine, per direction."""
    streaming_memory_bytes_per_s: float = 20.0e9
    """Bandwidth between an IPU and its Streaming Memory (off-chip DRAM), per direction."""
    sync_cycles: float = 150.0
    """Cycles of one on-chip BSP synchronisation."""
    calibration: Any = field(default_factory=dict)
    """Fitted constants for this generation (name -> value); see the fitting notes in the YAML."""


@dataclass
class SystemConfig:
    """An IPU-POD system (config group ``system``)."""

    name: str = "pod16"
    """System name: pod4, pod16, pod64, pod128, pod256."""
    num_ipus: int = 16
    """IPUs in the system."""
    ipus_per_machine: int = 4
    """IPUs per IPU-Machine (M2000 / Bow-2000)."""
    num_hosts: int = 1
    """Host servers."""
    num_racks: int = 1
    """IPU-POD64 racks (logical); collectives between racks go over GW-Links."""
    topology: str = "ladder"
    """IPU-Link topology inside a rack: ladder (POD4/16, IPU-Server cards) or 2d_torus (POD64)."""
    gw_link_bytes_per_s: float = 25.0e9
    """Gateway-link bandwidth per IPU-Machine between racks."""


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
    """grouped (default), interleaved or sequential (sharded execution)."""
    layers_per_ipu: List[int] = field(default_factory=list)
    """Layers in each pipeline stage, in order (halves of layers with ``split_layers``); empty means the whole model
    on one IPU."""
    device_mapping: Optional[List[int]] = None
    """IPU of each stage; one extra entry places the post-layer blocks (heads) in a stage of their own,
    e.g. BERT's [0,1,2,3,0]. Default: stage i on IPU i."""
    auto_stage: AutoStage = AutoStage.same_as_ipu
    """PopTorch's ``AutoStage`` for blocks placed by IPU: ``same_as_ipu`` (default: consecutive blocks on one IPU
    form one stage) or ``auto_increment`` (every block its own stage, as Optimum Graphcore's
    ``PipelinedExecution(AutoStage.AutoIncrement)`` makes them: more stages, a longer fill and drain, deeper
    stashes)."""
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


@dataclass
class EngineConfig:
    mode: EngineMode = EngineMode.analytic
    """analytic (memory and timing model) or functional (real numerics)."""
    epochs: int = 1
    """Functional mode: training epochs."""
    device: str = "auto"
    """Functional mode: cpu, cuda or auto."""
    resume: bool = False
    """Functional mode: continue from the last checkpoint in the run directory."""
    cache_dir: Optional[str] = None
    """Where graph captures are cached (default: IPUEXP_CACHE_DIR or ~/.cache/ipuexp)."""


@dataclass
class TrackingConfig:
    enabled: bool = True
    """Record the run in MLflow."""
    uri: Optional[str] = None
    """MLflow tracking URI; default MLFLOW_TRACKING_URI or sqlite:///mlflow.db."""
    experiment: Optional[str] = None
    """Experiment name; default the recipe name."""
    skip_completed: bool = False
    """Skip configurations already FINISHED in the experiment (same config hash)."""
    ui_url: Optional[str] = None
    """Address of the MLflow UI that a sweep's links open; default the tracking server, or ``mlflow ui``'s
    http://127.0.0.1:5000 for a local store (set it when the UI serves another port: ``mlflow ui --port 5001``)."""
    timeout_s: float = 10.0
    """How long the store may take to answer: it is probed before the job starts (a file that cannot be opened, a
    server that does not answer is one line after at most this long), and bounds each request to a tracking server
    (``MLFLOW_HTTP_REQUEST_TIMEOUT``, one retry)."""


@dataclass
class RayConfig:
    address: Optional[str] = None
    """None starts a local Ray; 'auto' or 'ray://host:10001' joins a cluster."""
    num_cpus: Optional[int] = None
    """CPUs for a local Ray (default: the machine's)."""
    object_store_memory: int = 200_000_000
    """Object store bytes for a local Ray."""
    connect_timeout_s: float = 10.0
    """Seconds a cluster's address may take to answer before a sweep starts (a dead address is one line, not
    Ray's minutes of silent retries)."""


@dataclass
class RunnerConfig:
    ray: RayConfig = field(default_factory=RayConfig)
    """Ray settings."""


class Charts(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


@dataclass
class ReportConfig:
    charts: Charts = Charts.auto
    """Memory, liveness and Gantt charts and the step trace per run: auto (single runs yes, sweep points no: the
    sweep's summary and report replace them, and a point re-run alone draws them), always or never."""
    fail_on_oom: bool = False
    """A single run whose configuration does not fit in IPU memory exits with status 3 instead of 0 (the report and
    files are written either way; ``result.json``'s ``fits`` says it too)."""




@dataclass
class MeasuredConfig:
    """What a real IPU system measured for this configuration: logged beside the prediction, with their ratio."""

    samples_per_s: Optional[float] = None
    """Measured training throughput of the whole system, samples per second (sequences per second for packed
    data, as the prediction counts them); null: not measured."""
    ipu_memory_bytes: Optional[int] = None
    """Measured memory of the fullest IPU (PopVision Graph Analyser's total memory of that IPU); null: not
    measured."""


class HostFramework(str, Enum):
    poptorch = "poptorch"
    optimum = "optimum"
    popart = "popart"
    tensorflow = "tensorflow"


@dataclass
class HostConfig:
    """The software that drives the training loop on the host: what one host call costs besides the device."""

    framework: HostFramework = HostFramework.poptorch
    """``poptorch``: a PopTorch application's own loop (Graphcore's examples: one model call, the LR schedule's
    ``setOptimizer``); ``optimum``: the Hugging Face Trainer of Optimum Graphcore on PopTorch (its Python step,
    callbacks and logging on top); ``popart``: a PopART session's ``run``; ``tensorflow``: TensorFlow's IPU loop
    (infeed and outfeed queues, the loop on the device). Each importer and recipe sets the one its source used."""


@dataclass
class ExperimentConfig:
    ipu: IPUHardware = field(default_factory=IPUHardware)
    """IPU generation (group ipu: mk1, mk2, bow)."""
    system: SystemConfig = field(default_factory=SystemConfig)
    """System (group system: pod4 .. pod256)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Model to run."""
    data: DataConfig = field(default_factory=DataConfig)
    """Input data."""
    options: Options = field(default_factory=Options)
    """IPU options."""
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    """Optimizer."""
    host: HostConfig = field(default_factory=HostConfig)
    """The host software of the training loop."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Engine."""
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    """MLflow tracking."""
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    """Ray runner."""
    report: ReportConfig = field(default_factory=ReportConfig)
    """Per-run charts and trace."""
    recipe: Optional[str] = None
    """Recipe name (set by ``+recipe=NAME``)."""
    source: Optional[str] = None
    """The published configuration file a recipe mirrors."""
    training: bool = True
    """Train (forward, backward, update) or run inference only."""
    calibration: Optional[str] = None
    """Calibration the prediction uses: null is the one shipped with ipuexp; NAME is ``NAME.yaml``, written by
    ``python -m ipuexp.calibrate`` into ``./calibration`` (or ``$IPUEXP_CALIBRATION_DIR``)."""
    measured: MeasuredConfig = field(default_factory=MeasuredConfig)
    """Measurements of this configuration on a real system, to compare with the prediction."""
