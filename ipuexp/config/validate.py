"""Cross-field validation of an experiment configuration.

The schema (``schema.py``, enforced by OmegaConf during composition) rejects unknown keys and wrong types; the rules
here are the ones that involve several fields or a documented limit of the frameworks or the hardware. Sources are
the public documents of ``docs/sources.md``, cited by short name below.

``validate(cfg)`` accepts the composed ``DictConfig`` or an ``ExperimentConfig`` object, raises
:class:`~ipuexp.config.errors.ConfigError` on the first error and returns the warnings.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import math
import re
import typing
from enum import Enum
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence

from omegaconf import DictConfig, ListConfig, OmegaConf

from ipuexp.config import schema
from ipuexp.config.errors import ConfigError
from ipuexp.data.paths import resolve_path
from ipuexp.models.hf_source import HF, INSTALL_HINT, TASKS
from ipuexp.models.variants import VARIANTS

PRECISIONS = tuple(p.value for p in schema.Precision)
IO_PRECISIONS = ("auto", "float32", "float16", "int8")
DATASETS = ("synthetic", "mnist")
STATE_PRECISIONS = ("float", "half")
IPU_NAMES = ("mk1", "mk2", "bow")
TOPOLOGIES = ("ladder", "2d_torus")
ENGINE_DEVICES = ("auto", "cpu", "cuda")
TENSOR_CATEGORIES = ("weights", "activations", "optimizer_state", "accumulators")
# Enumerated fields, checked here too so that an object built without OmegaConf gets the same one-line errors.
ENUMS = {
    "options.partials_type": schema.PartialsType,
    "options.recomputation.mode": schema.RecomputationMode,
    "options.pipeline.schedule": schema.Schedule,
    "options.output_mode": schema.OutputMode,
    "options.reduction_type": schema.ReductionType,
    "optimizer.name": schema.Optimizer,
    "engine.mode": schema.EngineMode,
}
# PopLibs MatMul.hpp/Convolution.hpp: "values below 0.05 often create a large amount of code".
AMP_CODE_WARNING_BELOW = 0.05
# PopTorch TensorLocations.numIOTiles (poptorch.Options, PopTorch user guide): "must be even, 32 <= n <= 192".
IO_TILES_MIN, IO_TILES_MAX = 32, 192
MNIST_FILES = ("images-idx3-ubyte", "labels-idx1-ubyte")

Warnings = List[str]


def validate(cfg: Any) -> List[str]:
    """Check ``cfg`` (DictConfig or ExperimentConfig); raise ConfigError on the first error, return warnings."""
    warnings: Warnings = []
    for check in _CHECKS:
        check(cfg, warnings)
    return warnings


def value_at(cfg: Any, key: str) -> Any:
    """The plain value (enums as their values, lists as lists) at a dotted ``key`` of a config or object."""
    node = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return _plain(node)


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (ListConfig, DictConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _int_at_least(cfg: Any, key: str, low: int, why: str = "") -> int:
    value = value_at(cfg, key)
    if not _is_int(value) or value < low:
        raise ConfigError(key, value, f"allowed: an integer >= {low}{why}")
    return value


def _positive(cfg: Any, key: str, why: str = "") -> float:
    value = value_at(cfg, key)
    if not _is_number(value) or value <= 0:
        raise ConfigError(key, value, f"allowed: a number > 0{why}")
    return value


def _one_of(cfg: Any, key: str, allowed: Sequence[str], why: str = "") -> str:
    value = value_at(cfg, key)
    if value not in allowed:
        raise ConfigError(key, value, f"allowed: {' | '.join(allowed)}{why}")
    return value


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


# ----------------------------------------------------------------------------------------------------------------
# Scalar rules first (cheap, no model knowledge), structural rules after.

def _check_keys(cfg: Any, w: Warnings) -> None:
    """Keys added with Hydra's ``+key=value`` bypass the schema's struct flag: reject those it does not define."""
    if isinstance(cfg, DictConfig):
        _unknown_keys(cfg, schema.ExperimentConfig, "")


def _unknown_keys(node: Any, cls: type, prefix: str) -> None:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in node.keys():
        full = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(full, _plain(node[key]), f"unknown key; allowed keys here: {', '.join(sorted(names))}")
        if dataclasses.is_dataclass(hints[key]):
            _unknown_keys(node[key], hints[key], f"{full}.")


def _check_enums(cfg: Any, w: Warnings) -> None:
    for key, enum in ENUMS.items():
        _one_of(cfg, key, [e.value for e in enum])
    _one_of(cfg, "options.precision", PRECISIONS, " (activation/gradient bits . weight bits)")


def _check_ipu(cfg: Any, w: Warnings) -> None:
    _one_of(cfg, "ipu.name", IPU_NAMES)
    for key in ("tiles", "ipu_links"):
        _int_at_least(cfg, f"ipu.{key}", 1)
    _int_at_least(cfg, "ipu.memory_per_tile_bytes", 1)
    for key in ("clock_hz", "flops_per_cycle_per_tile_fp16", "flops_per_cycle_per_tile_fp32",
                "tile_memory_bytes_per_cycle", "exchange_bytes_per_s", "ipu_link_bytes_per_s",
                "host_link_bytes_per_s", "streaming_memory_bytes_per_s"):
        _positive(cfg, f"ipu.{key}")
    sync = value_at(cfg, "ipu.sync_cycles")
    if not _is_number(sync) or sync < 0:
        raise ConfigError("ipu.sync_cycles", sync, "allowed: a number of cycles >= 0")


def _check_system(cfg: Any, w: Warnings) -> None:
    num_ipus = _int_at_least(cfg, "system.num_ipus", 1)
    per_machine = _int_at_least(cfg, "system.ipus_per_machine", 1)
    _int_at_least(cfg, "system.num_hosts", 1)
    racks = _int_at_least(cfg, "system.num_racks", 1)
    _one_of(cfg, "system.topology", TOPOLOGIES)
    if num_ipus % per_machine:
        raise ConfigError("system.num_ipus", num_ipus,
                          f"allowed: a multiple of system.ipus_per_machine={per_machine} (whole machines)")
    if num_ipus % racks:
        raise ConfigError("system.num_racks", racks, f"allowed: a divisor of system.num_ipus={num_ipus}")
    gw = value_at(cfg, "system.gw_link_bytes_per_s")
    if not _is_number(gw) or gw < 0 or (racks > 1 and gw <= 0):
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


def _check_batching(cfg: Any, w: Warnings) -> None:
    _int_at_least(cfg, "data.micro_batch_size", 1)
    _int_at_least(cfg, "options.device_iterations", 1)
    _int_at_least(cfg, "options.gradient_accumulation", 1)
    replicas = _int_at_least(cfg, "options.replication_factor", 1)
    instances = _int_at_least(cfg, "options.num_instances", 1)
    if replicas % instances:
        raise ConfigError("options.num_instances", instances,
                          f"allowed: a divisor of options.replication_factor={replicas} (each PopRun instance "
                          "drives the same number of replicas)")
    _int_at_least(cfg, "options.embedding_serialization_factor", 1)
    _int_at_least(cfg, "options.random_seed", 0)


def _check_numerics(cfg: Any, w: Warnings) -> None:
    _positive(cfg, "options.loss_scaling", " (the loss is multiplied by it before the backward pass)")
    _one_of(cfg, "optimizer.state_precision", STATE_PRECISIONS)
    _positive(cfg, "optimizer.learning_rate")
    wd = value_at(cfg, "optimizer.weight_decay")
    if not _is_number(wd) or wd < 0:
        raise ConfigError("optimizer.weight_decay", wd, "allowed: a number >= 0")
    momentum = value_at(cfg, "optimizer.momentum")
    if not _is_number(momentum) or not 0 <= momentum < 1:
        raise ConfigError("optimizer.momentum", momentum, "allowed: a number in [0, 1)")


def _check_io(cfg: Any, w: Warnings) -> None:
    tiles = value_at(cfg, "options.io.num_io_tiles")
    if not _is_int(tiles) or not (tiles == 0 or (tiles % 2 == 0 and IO_TILES_MIN <= tiles <= IO_TILES_MAX)):
        raise ConfigError("options.io.num_io_tiles", tiles,
                          f"allowed: 0, or an even number in [{IO_TILES_MIN}, {IO_TILES_MAX}] "
                          "(PopTorch TensorLocations.numIOTiles)")
    _int_at_least(cfg, "options.io.prefetch_depth", 1)
    share = value_at(cfg, "options.io.io_tiles_available_memory_proportion")
    if not _is_number(share) or not 0 < share <= 1:
        raise ConfigError("options.io.io_tiles_available_memory_proportion", share, "allowed: a number in (0, 1]")
    _one_of(cfg, "data.io_precision", IO_PRECISIONS)


def _check_tensor_locations(cfg: Any, w: Warnings) -> None:
    replicas = value_at(cfg, "options.replication_factor")
    for cat in TENSOR_CATEGORIES:
        base = f"options.tensor_locations.{cat}"
        for field in ("min_elements_for_off_chip", "min_elements_for_replicated_tensor_sharding"):
            _int_at_least(cfg, f"{base}.{field}", 0)
        if value_at(cfg, f"{base}.replicated_tensor_sharding") and replicas == 1:
            w.append(f"{base}.replicated_tensor_sharding=True has no effect with options.replication_factor=1 "
                     "(PopTorch shards across replicas and ignores it with one replica)")


def _check_data_engine(cfg: Any, w: Warnings) -> None:
    dataset = _one_of(cfg, "data.dataset", DATASETS)
    split = value_at(cfg, "data.train_split")
    if not _is_number(split) or not 0 < split < 1:
        raise ConfigError("data.train_split", split, "allowed: a number in (0, 1)")
    _int_at_least(cfg, "engine.epochs", 1)
    _one_of(cfg, "engine.device", ENGINE_DEVICES)
    if value_at(cfg, "engine.mode") == "functional" and dataset == "mnist":
        path = value_at(cfg, "data.path")
        folder = resolve_path(path)
        missing = [f for f in MNIST_FILES if not _mnist_file(folder, f)]
        if missing:
            raise ConfigError("data.path", path, f"allowed: a folder with the MNIST IDX files; {folder} has no "
                              f"{' or '.join(missing)} file (train-/t10k-*, optionally .gz)")


def _mnist_file(folder: Path, suffix: str) -> Optional[Path]:
    for split in ("train", "t10k"):
        for ext in ("", ".gz"):
            candidate = folder / f"{split}-{suffix}{ext}"
            if candidate.is_file():
                return candidate
    return None


def _check_model(cfg: Any, w: Warnings) -> None:
    for key in ("model.sequence_length", "model.image_size"):
        _int_at_least(cfg, key, 1)
    for key in ("model.num_layers", "model.num_classes", "model.vocab_size"):
        if value_at(cfg, key) is not None:
            _int_at_least(cfg, key, 1)
    if value_at(cfg, "model.name") == HF:
        _one_of(cfg, "model.hf.task", TASKS)
        if importlib.util.find_spec("transformers") is None:
            raise ConfigError("model.name", HF, f"allowed: {', '.join([*VARIANTS, 'custom'])}; {INSTALL_HINT}")
        _model_layers(cfg)  # builds it on the meta device: a file, task or architecture that does not work
    elif value_at(cfg, "model.name") == "custom":
        if not value_at(cfg, "model.target"):
            raise ConfigError("model.target", None, "allowed: the dotted path of a callable returning an "
                              "ipuexp.PipelinedModel (required when model.name=custom)")
    else:
        _model_layers(cfg)  # a table look-up for zoo models: checks name, size and overrides


def _check_pipeline(cfg: Any, w: Warnings) -> None:
    from ipuexp.config.pipeline import forward_stages, ipus_per_replica

    lpi = value_at(cfg, "options.pipeline.layers_per_ipu") or []
    if not isinstance(lpi, list) or any(not _is_int(n) or n < 0 for n in lpi):
        raise ConfigError("options.pipeline.layers_per_ipu", lpi, "allowed: a list of integers >= 0")
    dm = value_at(cfg, "options.pipeline.device_mapping") or None
    if dm is not None:
        _check_device_mapping(lpi, dm)
    if lpi:
        layers = _model_layers(cfg)
        if sum(lpi) != layers:
            raise ConfigError("options.pipeline.layers_per_ipu", lpi,
                              f"allowed: counts summing to the model's {layers} layers (sum is {sum(lpi)})")
        _check_stages_have_blocks(cfg, lpi, dm)

    ipr = ipus_per_replica(lpi, dm)
    replicas = value_at(cfg, "options.replication_factor")
    total, num_ipus = replicas * ipr, value_at(cfg, "system.num_ipus")
    if total > num_ipus:
        raise ConfigError("options.replication_factor", replicas,
                          f"allowed: replicas x {ipr} IPUs per replica <= system.num_ipus={num_ipus} "
                          f"({value_at(cfg, 'system.name')}); {replicas} x {ipr} = {total}")
    if not _is_power_of_two(total):
        raise ConfigError("options.replication_factor", replicas,
                          f"allowed: replicas x IPUs per replica a power of two (PopART acquires 2^n IPUs); "
                          f"{replicas} x {ipr} = {total}")

    # PopTorch CompilerImpl.cpp (poptorch.Options, PopTorch user guide): a pipelined training graph needs
    # gradientAccumulation >= 2F - 1; inference pipelining needs deviceIterations >= F. The sequential schedule
    # (sharded execution) does not pipeline.
    f = forward_stages(lpi, dm)
    if f > 1 and value_at(cfg, "options.pipeline.schedule") != "sequential":
        if value_at(cfg, "training"):
            ga = value_at(cfg, "options.gradient_accumulation")
            if ga < 2 * f - 1:
                raise ConfigError("options.gradient_accumulation", ga,
                                  f"allowed: >= 2*F - 1 = {2 * f - 1} for a pipelined training run with F={f} "
                                  "forward stages (PopTorch's rule)")
        else:
            di = value_at(cfg, "options.device_iterations")
            if di < f:
                raise ConfigError("options.device_iterations", di,
                                  f"allowed: >= F = {f} forward stages for pipelined inference (PopTorch's rule)")
    _check_amp(cfg, w, ipr)


def _check_stages_have_blocks(cfg: Any, lpi: List[int], dm: Any) -> None:
    """Every pipeline stage holds a block. PopTorch builds a stage from the blocks placed in it (PopTorch user
    guide, multi-IPU execution strategies: ``poptorch.Stage`` is made of blocks), so a stage without one is not
    a stage; Graphcore's BERT puts 0 layers on IPU 0 only because the embeddings fill it. A stage of no layers
    is filled by the blocks before the first layer (first stage) or after the last (last stage of layers, when
    no separate stage takes the heads)."""
    from ipuexp.config.pipeline import stage_mapping

    has_stem, has_heads = _model_ends(cfg)
    mapping = stage_mapping(lpi, dm)
    head_stage = len(mapping) > len(lpi)
    last = len(lpi) - 1
    for i, n in enumerate(lpi):
        if n == 0 and not ((i == 0 and has_stem) or (i == last and has_heads and not head_stage)):
            what = "no layer" + ("" if i not in (0, last) else
                                 " and the model has no blocks before its first layer" if i == 0 else
                                 " and the heads go to the separate head stage" if head_stage else
                                 " and the model has no blocks after its last layer")
            raise ConfigError("options.pipeline.layers_per_ipu", lpi,
                              f"allowed: at least one block in every pipeline stage; stage {i} (IPU "
                              f"{mapping[i]}) gets {what} (PopTorch builds a stage only from the blocks placed "
                              "in it)")
    if head_stage and not has_heads:
        raise ConfigError("options.pipeline.device_mapping", dm,
                          f"allowed: {len(lpi)} entries, one per stage of layers_per_ipu: the model has no blocks "
                          "after its last layer to fill a separate head stage")


def _model_ends(cfg: Any) -> tuple:
    from ipuexp.models import zoo_ends

    try:
        return zoo_ends(getattr(cfg, "model"))
    except ConfigError:
        raise
    except ValueError as exc:
        raise _model_error(cfg, str(exc)) from None


def _check_device_mapping(lpi: List[int], dm: Any) -> None:
    key = "options.pipeline.device_mapping"
    if not isinstance(dm, list) or any(not _is_int(i) or i < 0 for i in dm):
        raise ConfigError(key, dm, "allowed: null or a list of IPU indices >= 0, one per stage")
    lengths = (len(lpi), len(lpi) + 1) if lpi else (1,)
    if len(dm) not in lengths:
        allowed = " or ".join(str(n) for n in lengths)
        raise ConfigError(key, dm, f"allowed: {allowed} entries (one per stage of layers_per_ipu, plus one "
                          f"for a separate head stage); got {len(dm)}")
    used = sorted(set(dm))
    if used != list(range(len(used))):
        raise ConfigError(key, dm, f"allowed: IPU indices covering 0..{len(used) - 1} without gaps")


def _model_layers(cfg: Any) -> int:
    from ipuexp.models import zoo_layers

    model = getattr(cfg, "model")
    try:
        return int(zoo_layers(model))
    except ConfigError:
        raise
    except ValueError as exc:
        raise _model_error(cfg, str(exc)) from None


def _model_error(cfg: Any, message: str) -> ConfigError:
    """Turn the zoo's ``"model.size: 'x' is not allowed; allowed: ..."`` into a ConfigError."""
    match = re.match(r"^(model\.[\w.]+):\s*(.*)$", message.splitlines()[0] if message else "")
    if not match:
        return ConfigError("model.name", value_at(cfg, "model.name"), message)
    key, rest = match.groups()
    allowed = rest.split("allowed:", 1)[1].strip() if "allowed:" in rest else rest
    return ConfigError(key, value_at(cfg, key), f"allowed: {allowed}")


def _check_amp(cfg: Any, w: Warnings, ipr: int) -> None:
    key = "options.available_memory_proportion"
    amp = value_at(cfg, key)
    values = amp if isinstance(amp, list) else [amp]
    if isinstance(amp, list) and len(amp) != ipr:
        raise ConfigError(key, amp, f"allowed: a number, or a list with one value per IPU ({ipr} IPUs per "
                          f"replica); got {len(amp)} values")
    for v in values:
        if not _is_number(v) or not 0 < v <= 1:
            raise ConfigError(key, amp, "allowed: a number in (0, 1], or a list of them with one per IPU")
    low = [v for v in values if v < AMP_CODE_WARNING_BELOW]
    if low:
        w.append(f"{key}={amp!r}: values below {AMP_CODE_WARNING_BELOW} often create a large amount of code "
                 "(PopLibs availableMemoryProportion)")


# Store URI schemes MLflow's tracking client accepts (file and database stores, tracking servers, Databricks).
TRACKING_SCHEMES = ("file", "sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks")


def _check_tracking_runner(cfg: Any, w: Warnings) -> None:
    uri = value_at(cfg, "tracking.uri")
    if uri is not None:
        scheme = str(uri).split("://", 1)[0].split("+", 1)[0] if "://" in str(uri) else "file"
        if scheme not in TRACKING_SCHEMES:
            raise ConfigError("tracking.uri", uri,
                              f"allowed: a path or a URI with scheme {' | '.join(TRACKING_SCHEMES)}")
    cpus = value_at(cfg, "runner.ray.num_cpus")
    if cpus is not None and (not _is_int(cpus) or cpus < 1):
        raise ConfigError("runner.ray.num_cpus", cpus, "allowed: null (the machine's CPUs) or an integer >= 1")


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
    _check_model,
    _check_pipeline,
    _check_tracking_runner,
]
