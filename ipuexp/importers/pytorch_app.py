"""What Graphcore's PyTorch example applications (BERT, ViT, GPT-2) share: the keys of their argument parsers, the
keys that change nothing ipuexp predicts, the :class:`App` each application is, and the zoo transformer a file's
dimensions name.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, Mapping, Tuple

from ipuexp.importers.mapping import (Draft, as_bool, as_float, as_int, as_int_list, as_proportion,
                                             heads_back_on_first_ipu, refuse, to, zoo_layers, zoo_size)

Rule = Callable[[Draft, str, Any], None]
RECOMPUTE = "PopTorch's default with more than one IPU (poptorch.Options, PopTorch user guide)"


def _not(key: str, value: Any) -> bool:
    return not as_bool(key, value)


def half_or_float(key: str, value: Any) -> str:
    """A precision flag (half partials, half optimizer state): half when set, else float."""
    return "half" if as_bool(key, value) else "float"


# Keys every PyTorch application shares (its argument parser's names).
COMMON: Dict[str, Rule] = {
    "micro_batch_size": to("data.micro_batch_size", as_int),
    "replication_factor": to("options.replication_factor", as_int),
    "gradient_accumulation": to("options.gradient_accumulation", as_int),
    "device_iterations": to("options.device_iterations", as_int),
    "matmul_proportion": to("options.available_memory_proportion", as_proportion),
    "enable_half_partials": to("options.partials_type", half_or_float),
    "recompute_checkpoint_every_layer": to("options.recomputation.checkpoint_every_layer", as_bool),
    "optimizer_state_offchip": to("options.tensor_locations.optimizer_state.on_chip", _not),
    "replicated_tensor_sharding": to("options.tensor_locations.optimizer_state.replicated_tensor_sharding", as_bool),
    "embedding_serialization_factor": to("options.embedding_serialization_factor", as_int),
    "loss_scaling": to("options.loss_scaling", as_float),
    "auto_loss_scaling": to("options.auto_loss_scaling", as_bool),
    "random_seed": to("options.random_seed", as_int),
    "synthetic_data": to("options.synthetic_data", as_bool),
    "executable_cache_dir": lambda d, k, v: d.set("options.executable_cache_dir", str(v) or None, f"{k}: {v}")
    if v else d.skip(k),
    "learning_rate": to("optimizer.learning_rate", as_float),
    "weight_decay": to("optimizer.weight_decay", as_float),
    "enable_half_first_order_momentum": to("optimizer.state_precision", half_or_float),
    "layers_per_ipu": to("options.pipeline.layers_per_ipu", as_int_list),
    "ipus_per_replica": lambda d, k, v: d.set("_ipus_per_replica", as_int(k, v), f"{k}: {v}"),
}

# Keys that change nothing ipuexp predicts: run length, schedules of the learning rate, data files and loaders,
# logging and checkpoints, dropout and normalisation constants.
UNMODELLED = ("training_steps", "num_epochs", "epochs", "iterations", "lr_warmup", "lr_schedule", "warmup_steps",
              "input_files", "dataloader_workers", "async_dataloader", "custom_ops", "layer_norm_eps",
              "attention_probs_dropout_prob", "hidden_dropout_prob", "drop_path_rate", "max_sequences_per_pack",
              "packing_factor", "checkpoint_output_dir", "checkpoint_save_steps", "checkpoint_dir",
              "pretrained_checkpoint", "resume_training_from_checkpoint", "wandb", "wandb_project_name", "wandb_run_name",
              "dataset_path", "profile_dir", "disable_progress_bar", "lr_warmup_steps", "adam_eps",
              "bias_correction", "max_norm", "max_norm_bias", "loss", "alpha", "mixup", "extra_aug", "pretrain",
              "rebatched_worker_size", "representation_size", "recompute_mid_layers", "accum_type",
              "use_combined_accum", "remap_logit", "enable_sequence_serialized", "lr_decay", "config")


class App(ABC):
    """One example application: its model family, the keys it adds and what it sets in code."""

    name = ""
    title = ""
    family = ""
    rules: Dict[str, Rule] = {}
    code: Tuple[Tuple[str, Any, str], ...] = ()

    @abstractmethod
    def model(self, draft: Draft, cfg: Mapping[str, Any]) -> None:
        """Select and parametrise the zoo model from the file's model keys."""

    def finish(self, draft: Draft, cfg: Mapping[str, Any]) -> None:
        """Placement and the values the application sets in code."""
        for key, value, note in self.code:
            draft.default(key, value, note)
        _check_ipus_per_replica(draft)


def _check_ipus_per_replica(draft: Draft) -> None:
    ipr = draft.values.pop("_ipus_per_replica", None)
    draft.notes.pop("_ipus_per_replica", None)
    lpi = draft.values.get("options.pipeline.layers_per_ipu") or []
    if ipr is not None and lpi and len(lpi) != ipr:
        raise refuse("layers_per_ipu", lpi, f"allowed: one entry per IPU (ipus_per_replica: {ipr})")


def heads_on_first_ipu(draft: Draft, note: str) -> None:
    """A pipelined model's heads, tied to the embedding, back on IPU 0 unless the file places them."""
    lpi = draft.values.get("options.pipeline.layers_per_ipu") or []
    if lpi:
        draft.default("options.pipeline.device_mapping", heads_back_on_first_ipu(lpi), note)


def zoo_transformer(draft: Draft, cfg: Mapping[str, Any], family: str, dims: Mapping[str, Any],
                    layers_key: str) -> None:
    """Pick the zoo variant whose dimensions equal the file's; a different layer count overrides the variant's."""
    wanted, first = {}, None
    for hp, spec in dims.items():
        key, value = spec if isinstance(spec, tuple) else (spec, cfg.get(spec))
        if value is not None:
            wanted[hp] = as_int(key, value)
            first = first or (key, value)
    if not wanted:
        raise refuse("hidden_size", None, f"allowed: the model's dimensions (the {family} zoo needs hidden_size)")
    size = zoo_size(family, *first, wanted)
    draft.set("model.name", family)
    draft.set("model.size", size, ", ".join(f"{(s if isinstance(s, str) else s[0])}: {wanted[h]}"
                                            for h, s in dims.items() if h in wanted))
    if layers_key in cfg:
        layers = as_int(layers_key, cfg[layers_key])
        if layers != zoo_layers(family, size):
            draft.set("model.num_layers", layers, f"{layers_key}: {layers}")
