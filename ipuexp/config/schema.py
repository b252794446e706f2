"""Typed experiment configuration: ``ExperimentConfig`` and the nodes of a run (engine, tracking, runner, report,
host, measurements). The IPU's options are in ``config/options.py``, the machine in ``config/machine.py``, the model
and data in the layers that own them; all are named here too, where the rest of the code imports them from.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Optional

from ipuexp.config.machine import IPUHardware, SystemConfig
from ipuexp.config.options import (  # noqa: F401  (the schema's nodes, named where the code imports them)
    AutoStage, IOConfig, Optimizer, OptimizerConfig, Options, OutputMode, PartialsType, PipelineConfig, Precision,
    RecomputationConfig, RecomputationMode, ReductionType, Schedule, TensorLocation, TensorLocations, option_value)
from ipuexp.data.spec import DataConfig  # noqa: F401  (the parts of the schema their layers own)
from ipuexp.models.spec import HFModelConfig, ModelConfig  # noqa: F401


class EngineMode(str, Enum):
    analytic = "analytic"
    functional = "functional"



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
