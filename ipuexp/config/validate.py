"""Cross-field validation of an experiment configuration.

The schema (``schema.py``, enforced by OmegaConf during composition) rejects unknown keys and wrong types; the rules
here are the ones that involve several fields or a documented limit of the frameworks or the hardware. Sources are
the public documents of ``docs/sources.md``, cited by short name below.

``validate(cfg)`` accepts the composed ``DictConfig`` or an ``ExperimentConfig`` object, raises
:class:`~ipuexp.config.errors.ConfigError` on the first error and returns the warnings. It runs the scalar rules
below, then the model and pipeline rules of ``validate_pipeline.py``; ``checks.py`` holds the look-up and range
checks both use.
"""
from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any, Callable, List, Optional

from omegaconf import DictConfig

from ipuexp.config import schema
from ipuexp.config.checks import (Warnings, check_uri, int_at_least, is_int, is_number, one_of, plain, positive,
                                  value_at)
from ipuexp.config.errors import ConfigError
from ipuexp.config.validate_pipeline import check_model, check_pipeline
from ipuexp.data.paths import resolve_path
from ipuexp.config.types import ConfigNode

PRECISIONS = tuple(p.value for p in schema.Precision)
IO_PRECISIONS = ("auto", "float32", "float16", "int8")
DATASETS = ("synthetic", "mnist")
STATE_PRECISIONS = ("float", "half")
STASH_PRECISIONS = ("half", "float8")
IPU_NAMES = ("mk1", "mk2", "bow")
TOPOLOGIES = ("ladder", "2d_torus")
ENGINE_DEVICES = ("auto", "cpu", "cuda")
TENSOR_CATEGORIES = ("weights", "activations", "optimizer_state", "accumulators")
# Enumerated fields, checked here too so that an object built without OmegaConf gets the same one-line errors.
ENUMS = {
    "options.partials_type": schema.PartialsType,
    "options.recomputation.mode": schema.RecomputationMode,
    "options.pipeline.schedule": schema.Schedule,
    "options.pipeline.auto_stage": schema.AutoStage,
    "options.output_mode": schema.OutputMode,
    "options.reduction_type": schema.ReductionType,
    "optimizer.name": schema.Optimizer,
    "engine.mode": schema.EngineMode,
    "host.framework": schema.HostFramework,
}
_ENUM_VALUES = {key: [e.value for e in enum] for key, enum in ENUMS.items()}
# PopTorch TensorLocations.numIOTiles (poptorch.Options, PopTorch user guide): "must be even, 32 <= n <= 192".
IO_TILES_MIN, IO_TILES_MAX = 32, 192
MNIST_FILES = ("images-idx3-ubyte", "labels-idx1-ubyte")


def validate(cfg: ConfigNode) -> List[str]:
    """Check ``cfg`` (DictConfig or ExperimentConfig); raise ConfigError on the first error, return warnings."""
    warnings: Warnings = []
    for check in _CHECKS:
        check(cfg, warnings)
    return warnings


# ----------------------------------------------------------------------------------------------------------------
# Scalar rules first (cheap, no model knowledge), structural rules (validate_pipeline.py) after.

def _check_keys(cfg: ConfigNode, w: Warnings) -> None:
    """Keys added with Hydra's ``+key=value`` bypass the schema's struct flag: reject those it does not define."""
    if isinstance(cfg, DictConfig):
        _unknown_keys(cfg, schema.ExperimentConfig, "")


def _unknown_keys(node: Any, cls: type, prefix: str) -> None:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in node.keys():
        full = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(full, plain(node[key]), f"unknown key; allowed keys here: {', '.join(sorted(names))}")
        if dataclasses.is_dataclass(hints[key]):
            _unknown_keys(node[key], hints[key], f"{full}.")


def _check_enums(cfg: ConfigNode, w: Warnings) -> None:
    for key, allowed in _ENUM_VALUES.items():
        one_of(cfg, key, allowed)
    one_of(cfg, "options.precision", PRECISIONS, " (activation/gradient bits . weight bits)")


def _check_ipu(cfg: ConfigNode, w: Warnings) -> None:
    one_of(cfg, "ipu.name", IPU_NAMES)
    for key in ("tiles", "ipu_links"):
        int_at_least(cfg, f"ipu.{key}", 1)
    int_at_least(cfg, "ipu.memory_per_tile_bytes", 1)
    for key in ("clock_hz", "flops_per_cycle_per_tile_fp16", "flops_per_cycle_per_tile_fp32",
                "tile_memory_bytes_per_cycle", "exchange_bytes_per_s", "ipu_link_bytes_per_s",
                "host_link_bytes_per_s", "streaming_memory_bytes_per_s"):
        positive(cfg, f"ipu.{key}")
    sync = value_at(cfg, "ipu.sync_cycles")
    if not is_number(sync) or sync < 0:
        raise ConfigError("ipu.sync_cycles", sync, "allowed: a number of cycles >= 0")


def _check_system(cfg: ConfigNode, w: Warnings) -> None:
    num_ipus = int_at_least(cfg, "system.num_ipus", 1)
    per_machine = int_at_least(cfg, "system.ipus_per_machine", 1)
    int_at_least(cfg, "system.num_hosts", 1)
    racks = int_at_least(cfg, "system.num_racks", 1)
    one_of(cfg, "system.topology", TOPOLOGIES)
    if num_ipus % per_machine:
        raise ConfigError("system.num_ipus", num_ipus,
                          f"allowed: a multiple of system.ipus_per_machine={per_machine} (whole machines)")
    if num_ipus % racks:
        raise ConfigError("system.num_racks", racks, f"allowed: a divisor of system.num_ipus={num_ipus}")
    gw = value_at(cfg, "system.gw_link_bytes_per_s")
    if not is_number(gw) or gw < 0 or (racks > 1 and gw <= 0):
        raise ConfigError("system.gw_link_bytes_per_s", gw,
                          "allowed: a number > 0 when system.num_racks > 1 (racks talk over GW-Links), else >= 0")
    # TF distributed-training guide section 9 and the IPU-POD datasheets (docs/sources.md): IPU-POD systems are
    # built from IPU-Machines (M2000: Mk2, Bow-2000: Bow; 4 IPUs each); Mk1 IPUs come only on C2 PCIe cards (2 IPUs
    # each) in IPU-Servers.
    ipu, system = value_at(cfg, "ipu.name"), value_at(cfg, "system.name")
    is_pod = str(system).startswith("pod")
    if ipu == "mk1" and (is_pod or per_machine != 2):
        raise ConfigError("ipu.name", ipu, f"allowed with system={system}: mk2 | bow (Mk1 IPUs exist only on "
                          "C2 PCIe cards, 2 per card, in IPU-Server systems such as system=server16)")
    if ipu in ("mk2", "bow") and per_machine != 4:
        raise ConfigError("ipu.name", ipu, f"allowed with system={system}: mk1 ({ipu} IPUs come in IPU-Machines "
                          "of 4, M2000 or Bow-2000, i.e. IPU-POD systems)")


def _check_batching(cfg: ConfigNode, w: Warnings) -> None:
    int_at_least(cfg, "data.micro_batch_size", 1)
    int_at_least(cfg, "options.device_iterations", 1)
    int_at_least(cfg, "options.gradient_accumulation", 1)
    replicas = int_at_least(cfg, "options.replication_factor", 1)
    instances = int_at_least(cfg, "options.num_instances", 1)
    if replicas % instances:
        raise ConfigError("options.num_instances", instances,
                          f"allowed: a divisor of options.replication_factor={replicas} (each PopRun instance "
                          "drives the same number of replicas)")
    int_at_least(cfg, "options.embedding_serialization_factor", 1)
    int_at_least(cfg, "options.random_seed", 0)


def _check_numerics(cfg: ConfigNode, w: Warnings) -> None:
    positive(cfg, "options.loss_scaling", " (the loss is multiplied by it before the backward pass)")
    one_of(cfg, "optimizer.state_precision", STATE_PRECISIONS)
    if value_at(cfg, "options.stash_precision") is not None:
        one_of(cfg, "options.stash_precision", STASH_PRECISIONS, " | null (the activations' own precision)")
    lr = value_at(cfg, "optimizer.learning_rate")
    if not is_number(lr) or lr < 0:  # 0 holds the weights (PopTorch takes it: a warm-up from 0, a frozen run)
        raise ConfigError("optimizer.learning_rate", lr, "allowed: a number >= 0")
    wd = value_at(cfg, "optimizer.weight_decay")
    if not is_number(wd) or wd < 0:
        raise ConfigError("optimizer.weight_decay", wd, "allowed: a number >= 0")
    momentum = value_at(cfg, "optimizer.momentum")
    if not is_number(momentum) or not 0 <= momentum < 1:
        raise ConfigError("optimizer.momentum", momentum, "allowed: a number in [0, 1)")


def _check_io(cfg: ConfigNode, w: Warnings) -> None:
    tiles = value_at(cfg, "options.io.num_io_tiles")
    if not is_int(tiles) or not (tiles == 0 or (tiles % 2 == 0 and IO_TILES_MIN <= tiles <= IO_TILES_MAX)):
        raise ConfigError("options.io.num_io_tiles", tiles,
                          f"allowed: 0, or an even number in [{IO_TILES_MIN}, {IO_TILES_MAX}] "
                          "(PopTorch TensorLocations.numIOTiles)")
    int_at_least(cfg, "options.io.prefetch_depth", 1)
    share = value_at(cfg, "options.io.io_tiles_available_memory_proportion")
    if not is_number(share) or not 0 < share <= 1:
        raise ConfigError("options.io.io_tiles_available_memory_proportion", share, "allowed: a number in (0, 1]")
    one_of(cfg, "data.io_precision", IO_PRECISIONS)


def _check_tensor_locations(cfg: ConfigNode, w: Warnings) -> None:
    replicas = value_at(cfg, "options.replication_factor")
    for cat in TENSOR_CATEGORIES:
        base = f"options.tensor_locations.{cat}"
        for field in ("min_elements_for_off_chip", "min_elements_for_replicated_tensor_sharding"):
            int_at_least(cfg, f"{base}.{field}", 0)
        if value_at(cfg, f"{base}.replicated_tensor_sharding") and replicas == 1:
            w.append(f"{base}.replicated_tensor_sharding=True has no effect with options.replication_factor=1 "
                     "(PopTorch shards across replicas and ignores it with one replica)")


def _check_data_engine(cfg: ConfigNode, w: Warnings) -> None:
    dataset = one_of(cfg, "data.dataset", DATASETS)
    split = value_at(cfg, "data.train_split")
    if not is_number(split) or not 0 < split < 1:
        raise ConfigError("data.train_split", split, "allowed: a number in (0, 1)")
    int_at_least(cfg, "engine.epochs", 1)
    one_of(cfg, "engine.device", ENGINE_DEVICES)
    if value_at(cfg, "engine.mode") == "functional" and dataset == "mnist":
        path = value_at(cfg, "data.path")
        folder = resolve_path(path)
        missing = [f for f in MNIST_FILES if not _mnist_file(folder, f)]
        if missing:
            raise ConfigError("data.path", path, f"allowed: a folder with the MNIST IDX files; {folder} has no "
                              f"{' or '.join(missing)} file (train-/t10k-*, optionally .gz)")


def _check_packing(cfg: ConfigNode, w: Warnings) -> None:
    """Packed sequences and split layers (Graphcore's packed MLPerf BERT), for the zoo's BERT; the average
    sequences per pack between 1 and the maximum."""
    most = int_at_least(cfg, "data.packing.max_sequences_per_pack", 1)
    avg = value_at(cfg, "data.packing.avg_sequences_per_pack")
    if not is_number(avg) or not 1 <= avg <= most:
        raise ConfigError("data.packing.avg_sequences_per_pack", avg,
                          f"allowed: a number from 1 to data.packing.max_sequences_per_pack={most}")
    name = value_at(cfg, "model.name")
    if most > 1 and name != "bert":
        raise ConfigError("data.packing.max_sequences_per_pack", most,
                          f"allowed: 1 for model.name={name} (packed sequences are modelled for the zoo's BERT "
                          "pre-training, model.name=bert)")
    split = value_at(cfg, "options.pipeline.split_layers")
    if split and name != "bert":
        raise ConfigError("options.pipeline.split_layers", split, f"allowed: false for model.name={name} (layers "
                          "split into attention and feed-forward blocks for the zoo's BERT, model.name=bert)")
    if value_at(cfg, "model.split_layers") != split:
        raise ConfigError("model.split_layers", value_at(cfg, "model.split_layers"),
                          f"allowed: options.pipeline.split_layers ({split}), which sets it")
    per_row = value_at(cfg, "model.sequences_per_pack")
    if per_row != most:
        raise ConfigError("model.sequences_per_pack", per_row,
                          f"allowed: data.packing.max_sequences_per_pack ({most}), which sets it")


def _mnist_file(folder: Path, suffix: str) -> Optional[Path]:
    for split in ("train", "t10k"):
        for ext in ("", ".gz"):
            candidate = folder / f"{split}-{suffix}{ext}"
            if candidate.is_file():
                return candidate
    return None


def _check_tracking_runner(cfg: ConfigNode, w: Warnings) -> None:
    check_uri("tracking.uri", value_at(cfg, "tracking.uri"))
    positive(cfg, "tracking.timeout_s", " (seconds the tracking store may take to answer)")
    ui = value_at(cfg, "tracking.ui_url")
    if ui is not None and not str(ui).startswith(("http://", "https://")):
        raise ConfigError("tracking.ui_url", ui, "allowed: null or the UI's address, e.g. http://127.0.0.1:5001")
    cpus = value_at(cfg, "runner.ray.num_cpus")
    if cpus is not None and (not is_int(cpus) or cpus < 1):
        raise ConfigError("runner.ray.num_cpus", cpus, "allowed: null (the machine's CPUs) or an integer >= 1")


def _check_measured(cfg: ConfigNode, w: Warnings) -> None:
    for key in ("measured.samples_per_s", "measured.ipu_memory_bytes"):
        value = value_at(cfg, key)
        if value is not None and (not is_number(value) or value <= 0):
            raise ConfigError(key, value, "allowed: null (not measured) or a measured value > 0")


_CHECKS: List[Callable[[Any, Warnings], None]] = [
    _check_keys,
    _check_enums,
    _check_ipu,
    _check_system,
    _check_batching,
    _check_numerics,
    _check_io,
    _check_tensor_locations,
    _check_data_engine,
    _check_packing,
    check_model,
    check_pipeline,
    _check_tracking_runner,
    _check_measured,
]
