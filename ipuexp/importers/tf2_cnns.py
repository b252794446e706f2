"""Graphcore's TensorFlow 2 CNN application (graphcore/examples ``vision/cnns/tensorflow2``): its ``configs.yml``
and the ``train.py --config`` command lines of its ``benchmarks.yml``.

Keys are the argument parser's options with dashes (``--micro-batch-size`` is the key ``micro-batch-size``), as
in the file; a command line's flags are read the same way. The zoo has ResNet-50 of this application's models;
the others are refused by ``model-name``.
"""
from __future__ import annotations

import re
from typing import Any, List, Mapping

from ipuexp.importers.mapping import (Draft, accumulation_from_global, as_bool, as_float, as_int,
                                             as_int_list, choose, classify, refuse, to)
from ipuexp.importers.tf1_cnns import RESNET50_STAGES, split_counts

TITLE = "Graphcore's CNN example (TensorFlow 2)"


def _percent(key: str, value: Any) -> Any:
    """available-memory-proportion is given in percent (``[15]`` is 0.15)."""
    items = value if isinstance(value, list) else [value]
    return [as_float(key, v) / 100 for v in items]


def _norm(draft: Draft, key: str, value: Any) -> None:
    name = value.get("name") if isinstance(value, dict) else value
    if str(name) not in ("batch_norm", "custom_batch_norm"):
        raise refuse(key, name, "allowed: batch_norm, custom_batch_norm (the zoo's ResNet-50 uses batch norm)")
    draft.skip(key)


def _optimizer_params(draft: Draft, key: str, value: Any) -> None:
    params = value if isinstance(value, dict) else {}
    if "momentum" in params:
        draft.set("optimizer.momentum", as_float(f"{key}.momentum", params["momentum"]),
                  f"{key}.momentum: {params['momentum']}")
    if "weight_decay" in params:
        draft.set("optimizer.weight_decay", as_float(f"{key}.weight_decay", params["weight_decay"]),
                  f"{key}.weight_decay: {params['weight_decay']}")


def _dataset(draft: Draft, key: str, value: Any) -> None:
    if str(value) != "imagenet":
        raise refuse(key, value, "allowed: imagenet (the zoo's ResNet-50 is the ImageNet network)")
    draft.skip(key)


RULES = {
    "dataset": _dataset,
    "micro_batch_size": to("data.micro_batch_size", as_int),
    "global_batch_size": lambda d, k, v: d.set("_global_batch", as_int(k, v)),
    "num_replicas": to("options.replication_factor", as_int),
    "precision": to("options.precision", lambda k, v: choose(k, v, {"16.16": "16.16", "16.32": "16.32",
                                                                   "32.32": "32.32"})),
    "half_partials": to("options.partials_type", lambda k, v: "half" if as_bool(k, v) else "float"),
    "stochastic_rounding": to("options.stochastic_rounding", lambda k, v: str(v).upper() == "ON"),
    "stable_norm": to("options.enable_stable_norm", as_bool),
    "available_memory_proportion": to("options.available_memory_proportion", _percent),
    "loss_scaling": to("options.loss_scaling", as_float),
    "eight_bit_transfer": lambda d, k, v: d.set("data.io_precision", "int8" if as_bool(k, v) else "auto",
                                                f"{k}: {v}" + (" (images cross the host link as uint8)"
                                                               if as_bool(k, v) else "")),
    "optimizer_state_offloading": to("options.tensor_locations.optimizer_state.on_chip",
                                     lambda k, v: not as_bool(k, v)),
    "optimizer": to("optimizer.name", lambda k, v: choose(k, v, {"sgd": "sgd_momentum", "lars": "lars"})),
    "optimizer_params": _optimizer_params,
    "l2_regularization": lambda d, k, v: d.default("optimizer.weight_decay", as_float(k, v), f"{k}: {v}"),
    "norm_layer": _norm,
    "seed": to("options.random_seed", as_int),
}
# Keys that change nothing ipuexp predicts: data paths and preprocessing placement, run length, the learning-rate
# schedule, logging, checkpoints, validation, label smoothing, Poplar buffer sizes and exchange targets (ipuexp's
# exchange model has no such knobs), the distributed batch norm's replica group (statistics only).
UNMODELLED = ("dataset_path", "logs_per_epoch", "accelerator_side_preprocess", "num_epochs", "validation",
              "lr_schedule", "lr_warmup_params", "lr_schedule_params", "lr_staircase", "label_smoothing",
              "internal_exchange_optimization_target", "max_cross_replica_buffer_size", "gather_conv_output",
              "min_remote_tensor_size", "dbn_replica_group_size", "fused_preprocessing", "ckpts_per_epoch",
              "validation_micro_batch_size", "first_ckpt_epoch", "max_reduce_many_buffer_size", "config",
              "checkpoint_output_dir", "checkpoint_input_dir", "clean_dir", "wandb", "wandb_run_name")
PIPELINE_KEYS = ("pipeline-splits", "device-mapping", "pipeline-schedule", "recomputation")


def convert(cfg: Mapping[str, Any], draft: Draft) -> Draft:
    cfg = {str(k).replace("_", "-"): v for k, v in cfg.items()}
    if "model" in cfg:
        raise refuse("model", cfg["model"], "allowed: model-name resnet50 (the zoo has ResNet-50 of this "
                     "application's models)")
    if str(cfg.get("model-name")) != "resnet50":
        raise refuse("model-name", cfg.get("model-name"), "allowed: resnet50 (the zoo has ResNet-50 of this "
                     "application's models)")
    draft.set("model.name", "resnet50")
    draft.set("model.size", "50", "model-name: resnet50")
    draft.set("model.image_size", 224, "dataset: imagenet (224 x 224 training crops)")
    classify(draft, {k: v for k, v in cfg.items() if k not in ("model-name",) + PIPELINE_KEYS},
             {k.replace("_", "-"): rule for k, rule in RULES.items()}, [k.replace("_", "-") for k in UNMODELLED])
    _pipeline(draft, cfg)
    accumulation_from_global(draft, "global-batch-size", "micro-batch-size x num-replicas")
    name = draft.source.rsplit("#", 1)[-1]
    serving = "_infer" in name
    if serving:
        # The application's resnet50_infer_* configurations are what its serving client (send_request.py in
        # benchmarks.yml) runs: the exported model, forward only.
        draft.set("training", False, f"{name}: the serving configuration (send_request.py), forward passes only")
    draft.default("options.device_iterations", 1, "one batch per request of the serving client" if serving else
                  "one weight update per host call is assumed")
    draft.default("options.replication_factor", 1, "--num-replicas default 1")
    draft.default("options.precision", "16.16", "--precision default 16.16")
    return draft


def _ends(splits: List[Any], key: str = "pipeline-splits") -> List[str]:
    """Keras ResNet-50 block outputs ``conv{stage+1}_block{block}_out`` as the TF1 application's names."""
    out = []
    for s in splits:
        m = re.fullmatch(r"conv(\d)_block(\d+)_out", str(s))
        if not m or not 2 <= int(m.group(1)) <= 5:
            raise refuse(key, s, "allowed: bottleneck block outputs conv{2-5}_block{n}_out of ResNet-50")
        out.append(f"b{int(m.group(1)) - 1}/{int(m.group(2)) - 1}/relu")
    return out


def _pipeline(draft: Draft, cfg: Mapping[str, Any]) -> None:
    splits = list(cfg.get("pipeline-splits") or [])
    recompute = as_bool("recomputation", cfg.get("recomputation", False))
    if not splits:
        draft.set("options.recomputation.mode", "none", f"recomputation: {recompute} (no pipeline splits)")
        return
    counts = split_counts(_ends(splits), key="pipeline-splits")
    draft.set("options.pipeline.layers_per_ipu", counts,
              f"pipeline-splits {splits} end segments after blocks of {list(RESNET50_STAGES)}")
    mapping = as_int_list("device-mapping", cfg["device-mapping"]) if "device-mapping" in cfg else None
    if mapping is not None and (len(mapping) != len(counts) or min(mapping) < 0):
        raise refuse("device-mapping", cfg["device-mapping"], f"allowed: one IPU index >= 0 per stage "
                     f"({len(counts)} stages)")
    draft.set("options.pipeline.device_mapping", mapping,
              f"device-mapping: {mapping}" if mapping is not None else "stage i on IPU i (the default mapping)")
    # The application's --pipeline-schedule default (its README's argument list: "(default: Grouped)").
    schedule = cfg.get("pipeline-schedule", "Grouped")
    draft.set("host.framework", "tensorflow", "TensorFlow 2 for IPU: Keras fit with steps_per_execution on the device")
    draft.set("options.pipeline.schedule", choose("pipeline-schedule", schedule, {
        "Grouped": "grouped", "Interleaved": "interleaved", "Sequential": "sequential"}),
        f"pipeline-schedule: {schedule}")
    draft.set("options.recomputation.mode", "pipeline" if recompute else "none", f"recomputation: {recompute}")
    draft.set("options.recomputation.checkpoint_every_layer", False, "recomputation points are the splits only")
    amp = draft.values.get("options.available_memory_proportion")
    if isinstance(amp, list) and len(amp) == 1 and len(set(mapping or range(len(counts)))) > 1:
        draft.set("options.available_memory_proportion", amp[0], draft.notes.get(
            "options.available_memory_proportion", "") + " (one value for every IPU)")

