"""Graphcore's TensorFlow 1 CNN application (``configs.yml``), as in its MLPerf Training ResNet-50 submissions
(``Graphcore/benchmarks/resnet/implementations/tensorflow/configs.yml``) and graphcore/examples
``applications/tensorflow/cnns/training``; and the command lines of its ``benchmarks.yml`` (``train.py --config``).
"""
from __future__ import annotations

import re
from typing import Any, List, Mapping

from ipuexp.importers.mapping import (Draft, as_bool, as_float, as_int, as_proportion, choose, classify,
                                             refuse, to)

TITLE = "Graphcore's TensorFlow 1 CNN application (MLPerf Training ResNet-50)"
# ResNet-50: the bottleneck blocks per stage (He et al. 2016, table 1); the application names stage s (1-based)
# block j's output ``b{s}/{j}/relu``.
RESNET50_STAGES = (3, 4, 6, 3)


def _offload(draft: Draft, key: str, value: Any) -> None:
    draft.set("options.tensor_locations.optimizer_state.on_chip", as_bool(key, value), f"{key}: {value}")


def _eight_bit(draft: Draft, key: str, value: Any) -> None:
    on = as_bool(key, value)
    draft.set("data.io_precision", "int8" if on else "auto",
              f"{key}: {value}" + (" (images cross the host link as uint8; normalised on the IPU)" if on else ""))


def _dataset(draft: Draft, key: str, value: Any) -> None:
    if str(value) != "imagenet":
        raise refuse(key, value, "allowed: imagenet (the zoo's ResNet-50 is the ImageNet network)")
    draft.skip(key)


def _batch_norm(draft: Draft, key: str, value: Any) -> None:
    if not as_bool(key, value):
        raise refuse(key, value, "allowed: true (the zoo's ResNet-50 uses batch norm)")
    draft.skip(key)


def _group_norm(draft: Draft, key: str, value: Any) -> None:
    if as_bool(key, value):
        raise refuse(key, value, "allowed: false (the zoo's ResNet-50 uses batch norm)")
    draft.skip(key)


RULES = {
    "batch_size": to("data.micro_batch_size", as_int),
    "micro_batch_size": to("data.micro_batch_size", as_int),
    "replicas": to("options.replication_factor", as_int),
    "gradient_accumulation_count": to("options.gradient_accumulation", as_int),
    "available_memory_proportion": to("options.available_memory_proportion",
                                      lambda k, v: as_proportion(k, v if isinstance(v, list) else [v])),
    "wandb": lambda d, k, v: d.skip(k),
    "enable_half_partials": to("options.partials_type", lambda k, v: "half" if as_bool(k, v) else "float"),
    "precision": to("options.precision", lambda k, v: choose(k, v, {"16.16": "16.16", "16.32": "16.32",
                                                                   "32.32": "32.32"})),
    "no_stochastic_rounding": to("options.stochastic_rounding", lambda k, v: not as_bool(k, v)),
    "stable_norm": to("options.enable_stable_norm", as_bool),
    "eight_bit_io": _eight_bit,
    "disable_variable_offloading": _offload,
    "loss_scaling": to("options.loss_scaling", as_float),
    "optimiser": to("optimizer.name", lambda k, v: choose(k, v, {"momentum": "sgd_momentum", "sgd": "sgd",
                                                                  "LARS": "lars"})),
    "momentum": to("optimizer.momentum", as_float),
    "abs_learning_rate": to("optimizer.learning_rate", as_float),
    "weight_decay": to("optimizer.weight_decay", as_float),
    "synthetic_data": to("options.synthetic_data", as_bool),
    "dataset": _dataset,
    "batch_norm": _batch_norm,
    "group_norm": _group_norm,
}
UNMODELLED = ("data_dir", "epochs", "epochs_per_ckpt", "ckpts_per_epoch", "ckpt_epochs_offset", "logs_per_epoch",
              "lr_schedule", "warmup_epochs", "abs_end_learning_rate", "base_learning_rate_exponent",
              "label_smoothing", "BN_decay", "BN_span", "mlperf_logging", "max_cross_replica_buffer_size",
              "max_reduce_many_buffer_size", "gather_conv_output", "fused_preprocessing", "normalise_input",
              "internal_exchange_optimisation_target", "validation", "no_validation", "lars_weight_decay",
              "pipeline_num_parallel", "batches_per_step", "standard_imagenet", "seed", "config",
              "base_learning_rate", "wandb_run_name", "synthetic_data_initializer")
PIPELINE_KEYS = ("pipeline", "shards", "pipeline_splits", "pipeline_schedule", "enable_recomputation")
MODEL_KEYS = ("model", "model_size")


def convert(cfg: Mapping[str, Any], draft: Draft) -> Draft:
    model, size = cfg.get("model"), cfg.get("model_size")
    if str(model) != "resnet":
        raise refuse("model", model, "allowed: resnet (the zoo has ResNet-50 of this application's models)")
    if str(size) != "50":
        raise refuse("model_size", size, "allowed: 50 (the zoo's ResNet)")
    draft.set("model.name", "resnet50")
    draft.set("model.size", "50", "model: resnet, model_size: 50")
    draft.set("model.image_size", 224, "standard ImageNet crops of 224 x 224" +
              (" (standard_imagenet: True)" if cfg.get("standard_imagenet") else ""))
    rest = {k: v for k, v in cfg.items() if k not in MODEL_KEYS + PIPELINE_KEYS}
    classify(draft, rest, RULES, UNMODELLED)
    _pipeline(draft, cfg)
    _code_defaults(draft, cfg)
    return draft


def split_counts(splits: List[str], key: str = "pipeline_splits") -> List[int]:
    """Blocks per segment for split points after ``b{stage}/{block}/relu`` (stage 1-based)."""
    ends = []
    for s in splits:
        m = re.fullmatch(r"b(\d)/(\d+)/relu", str(s))
        if not m or not 1 <= int(m.group(1)) <= 4 or int(m.group(2)) >= RESNET50_STAGES[int(m.group(1)) - 1]:
            raise refuse(key, s, "allowed: bottleneck block outputs b{stage 1-4}/{block}/relu of ResNet-50")
        stage, block = int(m.group(1)), int(m.group(2))
        ends.append(sum(RESNET50_STAGES[:stage - 1]) + block + 1)
    if ends != sorted(set(ends)):
        raise refuse(key, splits, "allowed: split points in model order")
    bounds = [0] + ends + [sum(RESNET50_STAGES)]
    return [b - a for a, b in zip(bounds, bounds[1:])]


def _pipeline(draft: Draft, cfg: Mapping[str, Any]) -> None:
    pipelined = as_bool("pipeline", cfg.get("pipeline", False))
    shards = as_int("shards", cfg.get("shards", 1))
    splits = list(cfg.get("pipeline_splits") or [])
    recompute = as_bool("enable_recomputation", cfg.get("enable_recomputation", False))
    draft.set("host.framework", "tensorflow", "TensorFlow 1 for IPU: infeed/outfeed queues, the loop on the device")
    if not pipelined:
        if shards != 1 or splits:
            raise refuse("pipeline", cfg.get("pipeline"), "allowed: true when the model is split (sharding "
                         "without pipelining is not modelled)")
        draft.set("options.recomputation.mode", "all" if recompute else "none",
                  f"enable_recomputation: {recompute}")
        return
    counts = split_counts(splits)
    schedule = choose("pipeline_schedule", cfg.get("pipeline_schedule", "Grouped"),
                      {"Grouped": "grouped", "Interleaved": "interleaved", "Sequential": "sequential"})
    draft.set("options.pipeline.schedule", schedule, f"pipeline_schedule: {cfg.get('pipeline_schedule', 'Grouped')}")
    draft.set("options.pipeline.layers_per_ipu", counts,
              f"pipeline_splits {splits} end segments after blocks of {list(RESNET50_STAGES)}")
    if shards == 1:
        draft.set("options.pipeline.device_mapping", [0] * len(counts), "shards: 1: every segment on IPU 0")
    elif shards == len(counts):
        draft.set("options.pipeline.device_mapping", None, f"shards: {shards}: segment i on IPU i")
    else:
        raise refuse("shards", shards, f"allowed: 1 or {len(counts)} (one IPU per segment of pipeline_splits)")
    amp = draft.values.get("options.available_memory_proportion")
    if isinstance(amp, list) and len(amp) == 1 and shards > 1:
        draft.set("options.available_memory_proportion", amp[0], draft.notes.get(
            "options.available_memory_proportion", "") + " (one value for every IPU)")
    draft.set("options.recomputation.mode", "pipeline" if recompute else "none",
              f"enable_recomputation: {recompute}" + ("; each pipeline split is a recomputation point"
                                                      if recompute else ""))
    draft.set("options.recomputation.checkpoint_every_layer", False, "recomputation points are the splits only")


def _code_defaults(draft: Draft, cfg: Mapping[str, Any]) -> None:
    draft.default("options.device_iterations", 1,
                  "batches_per_step is a maximum in this application (default 1000); one weight update per host "
                  "call is assumed")
    draft.default("options.precision", "16.16", "not set here; the application's default --precision 16.16")
    draft.default("options.stochastic_rounding", True,
                  "not set here; the application enables it unless --no-stochastic-rounding")
    draft.default("options.tensor_locations.optimizer_state.on_chip", False,
                  "the application offloads variables unless --disable-variable-offloading")
    draft.default("options.partials_type", "float", "not set here; the application's default partials are float")
    half = draft.values["options.precision"] == "16.16"
    name = draft.values.get("optimizer.name", "sgd")
    if name in ("lars", "sgd_momentum"):
        draft.default("optimizer.state_precision", "half" if half else "float",
                      "Graphcore's LARSIpuOptimizer creates its momentum with add_slot(var, \"momentum_var\"), "
                      "so the slot takes the variable's dtype" if name == "lars" else
                      "the momentum slot takes the variable's dtype")
    replicas = as_int("replicas", cfg.get("replicas", 1))
    if replicas == 1:
        draft.default("options.replication_factor", 1, "replicas: 1 (the application's default)")
    if cfg.get("mlperf_logging") and replicas % 2 == 0:
        # The launcher is not in configs.yml: the MLPerf submissions' run_and_time.sh starts one PopRun instance
        # per 2 replicas (v1.1: --num-instances REPLICAS/2; v2.0 benchmarks.yml: 8 instances for 16 replicas).
        draft.default("options.num_instances", replicas // 2,
                      "MLPerf run_and_time.sh: poprun --num-instances REPLICAS/2")
