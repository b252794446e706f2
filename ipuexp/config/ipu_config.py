"""Optimum Graphcore ``ipu_config.json``: the ``IPUConfig`` of Hugging Face's Optimum Graphcore as ipuexp options.

Field names and defaults are ``IPUConfig``'s (``optimum/graphcore/ipu_configuration.py`` in huggingface/
optimum-graphcore, the releases whose values may be given per POD type: pod4, pod8, pod16, pod32, pod64). A file
may also carry the training arguments its example passes to ``IPUTrainingArguments`` (batch size, learning rate,
``fp32``, ``pod_type``); those that shape the run are mapped too. Every field ipuexp does not model is listed in
one warning line.

Which value wins: the recipe's options < the ipu_config.json's (its fields, or IPUConfig's default for a field it
leaves out) < the command line.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ipuexp.config.errors import ConfigError
from ipuexp.config.file_values import as_bool, as_float, as_int, as_int_list, choose, one_line, refuse
from ipuexp.config import ipu_config_releases as releases
from ipuexp.config.ipu_config_fields import HANDLED, feature_layers, for_mode, serialisation, speech_layers
from ipuexp.config.types import ConfigNode

DOC = "Optimum Graphcore IPUConfig"
POD_TYPES = ("pod4", "pod8", "pod16", "pod32", "pod64")
"""IPUConfig's ALLOWED_POD_TYPES (the keys of a per-POD-type value, with ``default``)."""

# What IPUConfig.to_options sets in code for training, whatever the file says.
TO_OPTIONS = (
    ("options.stochastic_rounding", True, "IPUConfig.to_options: Precision.enableStochasticRounding(not for_inference)"),
    ("options.reduction_type", "mean", "IPUConfig.to_options: accumulationAndReplicationReductionType(Mean)"),
    ("options.pipeline.schedule", "grouped", "IPUConfig.to_options: PipelinedExecution(AutoStage.AutoIncrement)"),
    ("options.pipeline.auto_stage", "auto_increment",
     "IPUConfig.to_options: AutoStage.AutoIncrement; PopART merges each IPU's consecutive stages"),
    ("host.framework", "optimum", "IPUTrainer.train: the Hugging Face Trainer's step, then setOptimizer"),
)
# Fields read elsewhere in this module (mapped, or used to check others).
_HANDLED = set(releases.FIRST_DEFAULTS) | {"layers_per_ipu", "ipus_per_replica", "seed", "executable_cache_dir", "synthetic_data",
                            "pod_type", "per_device_train_batch_size", "learning_rate", "weight_decay", "optimizer",
                            "loss_scaling", "fp32"} | HANDLED


def read(path: str | Path, key: str = "model.hf.ipu_config") -> Tuple[Dict[str, Any], List[str]]:
    """The file's fields (a repeated key keeps its last value, as ``json.load`` does) and a warning per repeat."""
    repeats: List[str] = []

    def pairs(items: Sequence[Tuple[str, Any]]) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for key, value in items:
            if key in out:
                same = "the same value" if out[key] == value else f"{json.dumps(out[key])} then {json.dumps(value)}"
                repeats.append(f"{key} ({same})")
            out[key] = value
        return out

    try:
        with open(path, encoding="utf-8") as f:
            fields = json.load(f, object_pairs_hook=pairs)
    except (OSError, ValueError) as exc:
        raise ConfigError(key, str(path), f"allowed: a readable JSON file ({exc})") from None
    if not isinstance(fields, dict):
        raise ConfigError(key, str(path), "allowed: a JSON object of IPUConfig fields")
    warnings = [f"{path}: repeated keys, the last value is used (as json.load does): {', '.join(repeats)}"] \
        if repeats else []
    return fields, warnings


def for_pod_type(fields: Mapping[str, Any], pod_type: Optional[str]) -> Dict[str, Any]:
    """IPUConfig.for_pod_type: a value given per POD type becomes the value for ``pod_type`` (or ``default``)."""
    out = {}
    for key, value in fields.items():
        if isinstance(value, dict) and value and set(value) <= set(POD_TYPES) | {"default"}:
            if pod_type in value:
                value = value[pod_type]
            elif "default" in value and pod_type not in POD_TYPES:
                value = value["default"]
            elif "default" in value:
                value = value["default"]
            else:
                raise refuse(key, value, f"no value for POD type {pod_type}; allowed: a file giving "
                             f"{pod_type} or default")
        out[key] = value
    return out


def options(fields: Mapping[str, Any], pod_type: Optional[str], num_layers: Optional[int],
            device_mapping: Optional[List[int]], training: bool = True,
            model_config: Optional[Mapping[str, Any]] = None,
            release: Optional[str] = None) -> Tuple[Dict[str, Any], Dict[str, str], List[str]]:
    """ipuexp keys and values for an ipu_config.json's fields, the note of each, and the fields not modelled.

    ``pod_type`` picks per-POD-type values; ``num_layers`` (the model's) resolves ``-1`` in ``layers_per_ipu``;
    ``device_mapping`` is the recipe's placement, kept for the heads when the stages change; ``training`` False
    takes the inference fields (``ipu_config_fields``); ``model_config`` is a Transformers model's config.json
    (a speech model's flat layer list); ``release`` is the Optimum Graphcore release whose defaults fill the fields
    left out (unset: the first release's).
    """
    given = for_mode(for_pod_type(fields, pod_type), training)
    defaults = releases.defaults(release)
    f = {**defaults, **given}
    values: Dict[str, Any] = {}
    notes: Dict[str, str] = {}
    of = f" of Optimum Graphcore {release}" if release else ""

    def put(key: str, value: Any, field: str) -> None:
        values[key] = value
        notes[key] = f"{field}: {json.dumps(given[field])}" if field in given else \
            f"{field} not given: IPUConfig default{of} {json.dumps(defaults[field])}"

    put("options.replication_factor", as_int("replication_factor", f["replication_factor"]), "replication_factor")
    put("options.gradient_accumulation", as_int("gradient_accumulation_steps", f["gradient_accumulation_steps"]),
        "gradient_accumulation_steps")
    put("options.device_iterations", as_int("device_iterations", f["device_iterations"]), "device_iterations")
    put("options.inference_device_iterations", as_int("inference_device_iterations",
                                                      f["inference_device_iterations"]), "inference_device_iterations")
    put("options.tensor_locations.optimizer_state.on_chip",
        not as_bool("optimizer_state_offchip", f["optimizer_state_offchip"]), "optimizer_state_offchip")
    put("options.tensor_locations.optimizer_state.replicated_tensor_sharding",
        as_bool("replicated_tensor_sharding", f["replicated_tensor_sharding"]), "replicated_tensor_sharding")
    put("options.partials_type", "half" if as_bool("enable_half_partials", f["enable_half_partials"]) else "float",
        "enable_half_partials")
    put("optimizer.state_precision",
        "half" if as_bool("enable_half_first_order_momentum", f["enable_half_first_order_momentum"]) else "float",
        "enable_half_first_order_momentum")
    put("options.embedding_serialization_factor",
        serialisation(given, as_int("embedding_serialization_factor", f["embedding_serialization_factor"])),
        "projection_serialization_factor" if "projection_serialization_factor" in given
        else "embedding_serialization_factor")
    put("options.recomputation.checkpoint_every_layer",
        as_bool("recompute_checkpoint_every_layer", f["recompute_checkpoint_every_layer"]),
        "recompute_checkpoint_every_layer")
    put("options.output_mode", choose("output_mode", f["output_mode"], {m: m for m in ("all", "sum", "final",
                                                                                        "default")}), "output_mode")
    put("options.auto_loss_scaling", as_bool("auto_loss_scaling", f["auto_loss_scaling"]), "auto_loss_scaling")

    lpi = _layers(given, num_layers)
    if lpi is not None:
        lpi = speech_layers(lpi, num_layers, feature_layers(model_config))
    ipr = as_int("ipus_per_replica", given["ipus_per_replica"]) if "ipus_per_replica" in given else \
        (len(lpi) if lpi else None)
    if lpi is not None:
        if ipr is not None and len(lpi) != ipr:
            raise refuse("layers_per_ipu", given["layers_per_ipu"],
                         f"allowed: one entry per IPU (ipus_per_replica: {ipr})")
        put("options.pipeline.layers_per_ipu", lpi, "layers_per_ipu")
        mapping = _heads(device_mapping, len(lpi))
        if mapping != device_mapping:
            values["options.pipeline.device_mapping"] = mapping
            notes["options.pipeline.device_mapping"] = "stage i on IPU i" + (", heads back on IPU 0 as in the recipe"
                                                                           if mapping else "")
    amp = _proportion(f["matmul_proportion"], ipr)
    put("options.available_memory_proportion", amp, "matmul_proportion")

    if given.get("seed") is not None:
        put("options.random_seed", as_int("seed", given["seed"]), "seed")
    cache = given.get("executable_cache_dir")
    if cache and cache != "disabled":
        put("options.executable_cache_dir", str(cache), "executable_cache_dir")
    if "synthetic_data" in given:
        put("options.synthetic_data", as_bool("synthetic_data", given["synthetic_data"]), "synthetic_data")
    # IPUTrainingArguments an example passes in the same file.
    if "per_device_train_batch_size" in given:
        put("data.micro_batch_size", as_int("per_device_train_batch_size", given["per_device_train_batch_size"]),
            "per_device_train_batch_size")
    for field, key in (("learning_rate", "optimizer.learning_rate"), ("weight_decay", "optimizer.weight_decay"),
                       ("loss_scaling", "options.loss_scaling")):
        if field in given:
            put(key, as_float(field, given[field]), field)
    if "optimizer" in given:
        put("optimizer.name", choose("optimizer", given["optimizer"], {"AdamW": "adamw", "Adam": "adam",
                                                                      "LAMB": "lamb", "SGD": "sgd"}), "optimizer")
    if "fp32" in given:
        put("options.precision", "32.32" if as_bool("fp32", given["fp32"]) else "16.16", "fp32")
    for key, value, note in TO_OPTIONS:
        values[key], notes[key] = value, note
    if not training:
        values["options.pipeline.schedule"] = "sequential"
        notes["options.pipeline.schedule"] = "IPUConfig.to_options(for_inference=True): ShardedExecution"
        # IPUConfig's inference batch: inference_replication_factor x inference_device_iterations, no accumulation
        values["options.gradient_accumulation"] = 1
        notes["options.gradient_accumulation"] = "inference: IPUConfig accumulates no gradients"
        values["options.device_iterations"] = values["options.inference_device_iterations"]
        notes["options.device_iterations"] = notes["options.inference_device_iterations"]
    unmodelled = [k for k in fields if k not in _HANDLED]
    return values, notes, unmodelled


def _layers(given: Mapping[str, Any], num_layers: Optional[int]) -> Optional[List[int]]:
    """``layers_per_ipu`` with IPUConfig's ``-1`` wildcards spread over the model's remaining layers."""
    if "layers_per_ipu" not in given:
        return None
    lpi = as_int_list("layers_per_ipu", given["layers_per_ipu"])
    if -1 not in lpi:
        return lpi
    if num_layers is None:
        raise refuse("layers_per_ipu", lpi, "allowed: counts without -1 when the model's layer count is unknown")
    wild = lpi.count(-1)
    left = num_layers - sum(n for n in lpi if n > 0)
    if left < 0:
        raise refuse("layers_per_ipu", lpi, f"allowed: counts within the model's {num_layers} layers")
    if left % wild:
        raise refuse("layers_per_ipu", lpi, f"allowed: -1 entries that share the remaining {left} layers evenly")
    return [left // wild if n == -1 else n for n in lpi]


def _proportion(value: Any, ipus: Optional[int]) -> Any:
    """A number or one per IPU; a one-element list is one value for every IPU (IPUConfig.to_options)."""
    if isinstance(value, list):
        values = [as_float("matmul_proportion", v) for v in value]
        if len(values) == 1:
            return values[0]
        if ipus is not None and len(values) != ipus:
            raise refuse("matmul_proportion", value, f"allowed: one value, or one per IPU ({ipus})")
        return values
    return as_float("matmul_proportion", value)


def _heads(device_mapping: Optional[List[int]], stages: int) -> Optional[List[int]]:
    """The recipe's placement for ``stages`` stages: kept if it fits, else stage i on IPU i (and the heads back
    on IPU 0 when the recipe had them there)."""
    if device_mapping is None or len(device_mapping) in (stages, stages + 1) and \
            sorted(set(device_mapping)) == list(range(stages)):
        return device_mapping
    heads_on_first = len(device_mapping) >= 2 and device_mapping[-1] == 0 and device_mapping[:-1] == \
        list(range(len(device_mapping) - 1))
    if heads_on_first:
        return list(range(stages)) + [0]
    if device_mapping == list(range(len(device_mapping))):
        return None
    raise refuse("layers_per_ipu", stages, f"allowed: {len(device_mapping)} stages (the recipe's own device_mapping "
                 f"{device_mapping} cannot be carried over)")


def warning_line(path: str | Path, unmodelled: Sequence[str]) -> Optional[str]:
    if not unmodelled:
        return None
    return f"{path}: fields not modelled by ipuexp (no effect on the prediction): {one_line(list(unmodelled))}"


# ------------------------------------------------------------------------------------------------ run time
def apply(cfg: ConfigNode, overrides: Sequence[str] = ()) -> List[str]:
    """Apply ``model.hf.ipu_config`` (if set) to the composed ``cfg`` in place; the keys given in ``overrides``
    (the command line) keep their values. Returns the warnings."""
    from omegaconf import OmegaConf, open_dict

    path = OmegaConf.select(cfg, "model.hf.ipu_config", default=None)
    if not path:
        return []
    from ipuexp.data.paths import resolve_path

    fields, warnings = read(resolve_path(path))
    pod = fields.get("pod_type") if isinstance(fields.get("pod_type"), str) else None
    system = OmegaConf.select(cfg, "system.name", default=None)
    pod_type = system if system in POD_TYPES else pod
    num_layers = _model_layers(cfg)
    dm = OmegaConf.select(cfg, "options.pipeline.device_mapping", default=None)
    dm = list(dm) if dm is not None else None
    training = bool(OmegaConf.select(cfg, "training", default=True))
    release = OmegaConf.select(cfg, releases.KEY, default=None)
    values, _, unmodelled = options(fields, pod_type, num_layers, dm, training, _model_config(cfg), release)
    given = {o.split("=", 1)[0].lstrip("+~") for o in overrides if "=" in o}
    with open_dict(cfg):
        for key, value in values.items():
            if key not in given:
                OmegaConf.update(cfg, key, value, merge=False)
    lines = [warning_line(path, unmodelled), releases.defaults_line(path, fields, release)]
    return warnings + [line for line in lines if line]


def _model_config(cfg: ConfigNode) -> Optional[Dict[str, Any]]:
    """A Transformers model's config.json (after its overrides), without importing torch."""
    from omegaconf import OmegaConf

    if OmegaConf.select(cfg, "model.name", default=None) != "hf":
        return None
    from ipuexp.models.hf_source import resolve

    try:
        return resolve(cfg.model).config
    except ValueError:  # reported by the configuration checks
        return None


def _model_layers(cfg: ConfigNode) -> Optional[int]:
    try:
        from ipuexp.models import zoo_layers

        return int(zoo_layers(cfg.model))
    except Exception:  # a model the zoo cannot count (custom): -1 wildcards are then refused
        return None
