"""Graphcore's PyTorch CNN application (graphcore/examples ``vision/cnns/pytorch/train``): its ``configs.yml`` and
the ``train.py --config`` command lines of its ``benchmarks.yml``.

Keys are the argument parser's options (``train/train.py``, ``utils/argparser.py``); the parser's defaults for
keys a file leaves out are cited where they set a value ipuexp predicts with. The zoo has ResNet-50 of this
application's models; the others are refused by ``model``.
"""
from __future__ import annotations

from typing import Any, Mapping

from ipuexp.importers.mapping import (Draft, as_bool, as_float, as_int, as_proportion, choose, classify,
                                             only, refuse, to)

TITLE = "Graphcore's CNN example (PyTorch)"



def _recompute_mode(draft: Draft, key: str, value: Any) -> None:
    """The application recomputes with PopART's RecomputeAll (``_Popart.set("autoRecomputation", 3)``) whenever
    ``--recompute-mode`` is not none, checkpointing the tensors it names: ipuexp's ``all``."""
    mode = choose(key, value, {"none": "none", "manual": "manual"})
    draft.set("options.recomputation.mode", "none" if mode == "none" else "all",
              f"{key}: {value}" + (" (autoRecomputation RecomputeAll at the named checkpoints)" if mode != "none"
                                   else ""))


def _checkpoints(draft: Draft, key: str, value: Any) -> None:
    """Named recomputation checkpoints (``recomputationCheckpoint`` on those tensors): mostly the residual adds
    (``add_k``, a bottleneck block's output), which ipuexp places with a checkpoint at every layer's output, so the
    recomputation runs one block at a time. A warning, since the file's list may leave out some blocks or add
    tensors inside one."""
    names = [str(v) for v in (value or [])]
    if not names:
        draft.skip(key)
        return
    draft.set("options.recomputation.checkpoint_every_layer", True, f"{key}: {len(names)} named tensors, mostly "
              "the blocks' residual adds")
    adds = sum(1 for n in names if n == "add" or n.startswith("add_"))
    draft.warnings.append(f"{key}: {len(names)} named checkpoints ({adds} residual adds) modelled as one "
                          "checkpoint at every bottleneck block's output")


def _splits(draft: Draft, key: str, value: Any) -> None:
    if value:
        raise refuse(key, value, "allowed: [] (a single-IPU ResNet-50; the zoo's ResNet-50 is not split on this "
                     "application's layer names)")
    draft.skip(key)


RULES = {
    "data": only("imagenet", "the zoo's ResNet-50 is the ImageNet network"),
    "micro_batch_size": to("data.micro_batch_size", as_int),
    "replicas": to("options.replication_factor", as_int),
    "gradient_accumulation": to("options.gradient_accumulation", as_int),
    "device_iterations": to("options.device_iterations", as_int),
    "precision": to("options.precision", lambda k, v: choose(k, v, {"16.16": "16.16", "16.32": "16.32",
                                                                   "32.32": "32.32"})),
    "enable_stochastic_rounding": to("options.stochastic_rounding", as_bool),
    "half_partial": to("options.partials_type", lambda k, v: "half" if as_bool(k, v) else "float"),
    "available_memory_proportion": to("options.available_memory_proportion",
                                      lambda k, v: as_proportion(k, v if isinstance(v, list) else [v])),
    "loss_scaling": to("options.loss_scaling", as_float),
    "seed": to("options.random_seed", as_int),
    "disable_stable_batchnorm": to("options.enable_stable_norm", lambda k, v: not as_bool(k, v)),
    "offload_optimizer": to("options.tensor_locations.optimizer_state.on_chip", lambda k, v: not as_bool(k, v)),
    "enable_optimizer_rts": to("options.tensor_locations.optimizer_state.replicated_tensor_sharding", as_bool),
    "eight_bit_io": lambda d, k, v: d.set("data.io_precision", "int8" if as_bool(k, v) else "auto",
                                          f"{k}: {v}" + (" (images cross the host link as uint8)"
                                                         if as_bool(k, v) else "")),
    "optimizer": to("optimizer.name", lambda k, v: choose(k, v, {"sgd_combined": "sgd_momentum",
                                                                  "sgd": "sgd_momentum", "adamw": "adamw",
                                                                  "lamb": "lamb"})),
    "momentum": to("optimizer.momentum", as_float),
    "lr": to("optimizer.learning_rate", as_float),
    "weight_decay": to("optimizer.weight_decay", as_float),
    "norm_type": only("batch", "the zoo's ResNet-50 uses batch norm"),
    "recompute_mode": _recompute_mode,
    "recompute_checkpoints": _checkpoints,
    "pipeline_splits": _splits,
}
# Keys that change nothing ipuexp predicts: run length, learning-rate schedule, label smoothing, data paths and
# augmentation, where the input is normalised, Poplar's exchange optimisation target (ipuexp's exchange model has
# no such knob), executable cache, logging.
UNMODELLED = ("label_smoothing", "lr_schedule", "warmup_epoch", "epoch", "lr_scheduler_freq", "normalization_location",
              "use_bbox_info", "exchange_memory_target", "imagenet_data_path", "executable_cache_path",
              "checkpoint_output_dir", "checkpoint_input_dir", "wandb", "validation_mode", "config",
              "initial_loss_scaling", "dataloader_worker", "dataloader_rebatch_size", "checkpoint_save_freq")


def convert(cfg: Mapping[str, Any], draft: Draft) -> Draft:
    model = cfg.get("model")
    if str(model) != "resnet50":
        raise refuse("model", model, "allowed: resnet50 (the zoo has ResNet-50 of this application's models)")
    draft.set("model.name", "resnet50")
    draft.set("model.size", "50", "model: resnet50")
    draft.set("model.image_size", 224, "data: imagenet (224 x 224 training crops)")
    classify(draft, {k: v for k, v in cfg.items() if k != "model"}, RULES, UNMODELLED)
    # utils/argparser.py defaults for keys the file leaves out.
    draft.default("options.device_iterations", 1, "argparser: --device-iterations default 1")
    draft.default("options.replication_factor", 1, "argparser: --replicas default 1")
    draft.default("options.recomputation.mode", "none", "argparser: --recompute-mode default none")
    return draft
