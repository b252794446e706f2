"""Graphcore's PyTorch example applications: BERT and ViT ``configs*.yml`` and the ``benchmarks.yml`` command lines
of ViT and GPT-2 (graphcore/examples ``nlp/bert/pytorch``, ``vision/vit/pytorch``, ``nlp/gpt2/pytorch``).

A configuration file holds named configurations that inherit with YAML merge keys (``<<: *defaults``); the
application reads one (``--config NAME``), lets command-line flags override it (``--flag-name value`` is the key
``flag_name``) and sets the rest in code (``ipu_options.py``). The values the application sets in code, or takes
from its argument parser when the file is silent, are each application's ``CODE`` below, with their citations.
"""
from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ipuexp.config.importers.mapping import (Draft, as_bool, as_float, as_int, as_int_list, as_proportion, choose,
                                             classify, heads_back_on_first_ipu, refuse, to, zoo_layers, zoo_size)

Rule = Callable[[Draft, str, Any], None]
RECOMPUTE = "PopTorch's default with more than one IPU (poptorch.Options, PopTorch user guide)"


def _not(key: str, value: Any) -> bool:
    return not as_bool(key, value)


def _partials(key: str, value: Any) -> str:
    return "half" if as_bool(key, value) else "float"


def _state(key: str, value: Any) -> str:
    return "half" if as_bool(key, value) else "float"


# Keys every PyTorch application shares (its argument parser's names).
COMMON: Dict[str, Rule] = {
    "micro_batch_size": to("data.micro_batch_size", as_int),
    "replication_factor": to("options.replication_factor", as_int),
    "gradient_accumulation": to("options.gradient_accumulation", as_int),
    "device_iterations": to("options.device_iterations", as_int),
    "matmul_proportion": to("options.available_memory_proportion", as_proportion),
    "enable_half_partials": to("options.partials_type", _partials),
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
    "enable_half_first_order_momentum": to("optimizer.state_precision", _state),
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


# ------------------------------------------------------------------------------------------------ applications
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


class BertApp(App):
    name, title, family = "bert", "Graphcore's BERT example (PyTorch)", "bert"
    rules = {
        **COMMON,
        "optimizer": to("optimizer.name", lambda k, v: choose(k, v, {"AdamW": "adamw", "Adam": "adam", "LAMB": "lamb",
                                                                        "LAMBNoBiasCorrection": "lamb", "SGD": "sgd"})),
        "vocab_size": to("model.vocab_size", as_int),
        "sequence_length": to("model.sequence_length", as_int),
        "dataset": lambda d, k, v: d.skip(k) if str(v) in ("pretraining", "generated") else _no_head(k, v),
        "packed_data": lambda d, k, v: d.skip(k) if not as_bool(k, v) else _no_packing(k, v),
    }
    code = (
        ("options.precision", "16.16", "run_pretraining.py: the model is cast to half (.half())"),
        ("options.stochastic_rounding", True, "ipu_options.py: Precision.enableStochasticRounding(True)"),
        ("options.recomputation.mode", "pipeline", RECOMPUTE),
        ("options.pipeline.schedule", "grouped", "ipu_options.py: PipelinedExecution(AutoStage.AutoIncrement)"),
        ("options.output_mode", "sum", "ipu_options.py: outputMode(Sum)"),
        ("options.reduction_type", "mean", "ipu_options.py: accumulationAndReplicationReductionType(Mean)"),
    )

    def model(self, draft: Draft, cfg: Mapping[str, Any]) -> None:
        _transformer(draft, cfg, "bert", {"hidden": "hidden_size", "heads": "num_attention_heads"},
                     "num_hidden_layers")
        if str(cfg.get("dataset", "pretraining")) not in ("pretraining", "generated"):
            _no_head("dataset", cfg["dataset"])
        seq = as_int("sequence_length", cfg.get("sequence_length", 128))
        if "mask_tokens" in cfg:
            from ipuexp.models.bert import mask_tokens_for

            if as_int("mask_tokens", cfg["mask_tokens"]) != mask_tokens_for(seq):
                raise refuse("mask_tokens", cfg["mask_tokens"], f"allowed: {mask_tokens_for(seq)} for sequence "
                             f"length {seq} (the zoo's BERT masks Graphcore's published count)")

    def finish(self, draft: Draft, cfg: Mapping[str, Any]) -> None:
        super().finish(draft, cfg)
        lpi = draft.values.get("options.pipeline.layers_per_ipu") or []
        if lpi:
            draft.default("options.pipeline.device_mapping", heads_back_on_first_ipu(lpi),
                          "modeling.py: pooler and MLM/NSP heads back on IPU 0, tied to the word embedding")


def _no_head(key: str, value: Any) -> None:
    raise refuse(key, value, "the zoo's BERT has the pretraining heads (MLM and NSP) only; allowed: pretraining, "
                 "generated (a task head such as SQuAD span prediction is not in the zoo)")


def _no_packing(key: str, value: Any) -> None:
    raise refuse(key, value, "allowed: false (packed sequences are not modelled)")


class VitApp(App):
    name, title, family = "vit", "Graphcore's ViT example (PyTorch)", "vit"
    rules = {
        **COMMON,
        "enable_rts": to("options.tensor_locations.optimizer_state.replicated_tensor_sharding", as_bool),
        "prefetch_depth": to("options.io.prefetch_depth", as_int),
        "precision": to("options.precision", lambda k, v: choose(k, v, {"16.16": "16.16", "16.32": "16.32",
                                                                       "32.32": "32.32"})),
        "stochastic_rounding": to("options.stochastic_rounding", as_bool),
        "half_partials": to("options.partials_type", _partials),
        "reduction_type": to("options.reduction_type", lambda k, v: choose(k, v, {"sum": "sum", "mean": "mean"})),
        "byteio": lambda d, k, v: d.set("data.io_precision", "int8" if as_bool(k, v) else "auto",
                                        f"{k}: {v}" + (" (images sent to the IPU as bytes)" if as_bool(k, v) else "")),
        "optimizer": to("optimizer.name", lambda k, v: choose(k, v, {"SGD": "sgd_momentum", "Adam": "adam",
                                                                        "AdamW": "adamw", "LAMB": "lamb"})),
        "momentum": to("optimizer.momentum", as_float),
        "adam_betas": lambda d, k, v: d.default("optimizer.momentum", as_float(k, v[0]), f"{k}: {v} (beta1)"),
        "first_order_type": to("optimizer.state_precision", lambda k, v: choose(k, v, {"fp32": "float",
                                                                                        "fp16": "half"})),
        "second_order_type": lambda d, k, v: d.skip(k) if str(v) == "fp32" or cfg_first(d) == "half"
        else _mixed_state(k, v),
        "num_labels": to("model.num_classes", as_int),
        "dataset": lambda d, k, v: d.skip(k) if str(v) in ("imagenet1k", "imagenet", "cifar10", "generated")
        else _raise(refuse(k, v, "allowed: imagenet1k, cifar10, generated")),
    }
    code = (
        ("options.partials_type", "half", "args.py: --half-partials default True -> Precision.setPartialsType(half)"),
        ("options.precision", "16.16", "args.py: --precision default 16.16"),
        ("options.stochastic_rounding", True, "args.py: --stochastic-rounding default True"),
        ("options.recomputation.mode", "pipeline", RECOMPUTE),
        ("options.tensor_locations.optimizer_state.on_chip", False, "args.py: --optimizer-state-offchip default True"),
        ("optimizer.state_precision", "float", "args.py: --first-order-type default fp32"),
        ("data.io_precision", "auto", "args.py: --byteio default False"),
        ("options.pipeline.schedule", "grouped", "ipu_options.py: PipelinedExecution(AutoStage.SameAsIpu)"),
        ("options.pipeline.device_mapping", None, "pipeline_model.py: embeddings on IPU 0, representation and head "
                                                  "on the last IPU"),
        ("options.output_mode", "all", "ipu_options.py: outputMode(OutputMode.All)"),
        # Dosovitskiy et al. 2021 (section 4.1): ViT-B/16 is pre-trained and fine-tuned at 224 x 224; the
        # application's ImageNet, CIFAR-10 and generated data are fed at that resolution.
        ("model.image_size", 224, "224 x 224 input (14 x 14 patches of 16)"),
    )

    def model(self, draft: Draft, cfg: Mapping[str, Any]) -> None:
        patch = cfg.get("patches_size", 16)
        patch = patch[0] if isinstance(patch, list) else patch
        _transformer(draft, cfg, "vit", {"hidden": "hidden_size", "heads": "num_attention_heads", "ffn": "mlp_dim",
                                         "patch": ("patches_size", as_int("patches_size", patch))},
                     "num_hidden_layers")

    def finish(self, draft: Draft, cfg: Mapping[str, Any]) -> None:
        if draft.values.get("optimizer.name") == "sgd_momentum" and not draft.values.get("optimizer.momentum"):
            draft.set("optimizer.name", "sgd", "optimizer: SGD without momentum")
        super().finish(draft, cfg)


def cfg_first(draft: Draft) -> Optional[str]:
    return draft.values.get("optimizer.state_precision")


def _mixed_state(key: str, value: Any) -> None:
    raise refuse(key, value, "allowed: fp32, or fp16 with first_order_type fp16 (ipuexp keeps one optimizer-state "
                 "precision)")


def _raise(err: Exception) -> None:
    raise err


class Gpt2App(App):
    name, title, family = "gpt2", "Graphcore's GPT-2 example (PyTorch)", "gpt2"
    rules = {
        **COMMON,
        "batch_size": to("data.micro_batch_size", as_int),
        "max_len": to("model.sequence_length", as_int),
        "seed": to("options.random_seed", as_int),
        "optimizer": to("optimizer.name", lambda k, v: choose(k, v, {"AdamW": "adamw", "Adam": "adam",
                                                                        "LAMB": "lamb", "SGD": "sgd"})),
        "dataset": lambda d, k, v: d.set("data.dataset", "synthetic", f"{k}: {v}") if str(v) == "generated"
        else _raise(refuse(k, v, "allowed: generated (ipuexp's analytic runs use synthetic data)")),
        "model": lambda d, k, v: None,
    }
    code = (
        ("options.precision", "16.16", "train_gpt2.py: GPT2Wrapper(...).half()"),
        ("options.stochastic_rounding", True, "ipu_options.py: Precision.enableStochasticRounding(True)"),
        ("options.recomputation.mode", "pipeline", RECOMPUTE),
        ("options.tensor_locations.optimizer_state.on_chip", False,
         "arguments.py: --optimizer-state-offchip default True"),
        ("options.pipeline.schedule", "grouped", "ipu_options.py: PipelinedExecution(AutoStage.AutoIncrement)"),
        ("options.output_mode", "sum", "ipu_options.py: outputMode(OutputMode.Sum)"),
        ("options.reduction_type", "mean", "ipu_options.py: accumulationAndReplicationReductionType(Mean)"),
        ("options.loss_scaling", 50000.0, "arguments.py: --loss-scaling default 50000.0"),
        ("options.auto_loss_scaling", False, "arguments.py: --auto-loss-scaling default False"),
        ("options.random_seed", 1234, "arguments.py: --seed default 1234"),
        ("optimizer.weight_decay", 0.0, "arguments.py: --weight-decay default 0.0"),
        ("optimizer.state_precision", "float", "no half-momentum option in this application"),
    )
    SIZES = {"gpt2": "small", "gpt2-medium": "medium", "gpt2-large": "large"}

    def model(self, draft: Draft, cfg: Mapping[str, Any]) -> None:
        name = cfg.get("model", "gpt2")
        size = choose("model", name, self.SIZES)
        draft.set("model.name", "gpt2")
        draft.set("model.size", size, f"--model {name}")

    def finish(self, draft: Draft, cfg: Mapping[str, Any]) -> None:
        super().finish(draft, cfg)
        lpi = draft.values.get("options.pipeline.layers_per_ipu") or []
        if lpi:
            draft.default("options.pipeline.device_mapping", heads_back_on_first_ipu(lpi),
                          "train_gpt2.py: LM head, tied to the token embedding, back on IPU 0")


def _transformer(draft: Draft, cfg: Mapping[str, Any], family: str, dims: Mapping[str, Any], layers_key: str) -> None:
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


APPS = {"bert": BertApp(), "vit": VitApp(), "gpt2": Gpt2App()}
MODEL_KEYS = {"hidden_size", "num_hidden_layers", "num_attention_heads", "mlp_dim", "patches_size", "mask_tokens",
              "model"}


def app_of_config(cfg: Mapping[str, Any]) -> App:
    if "patches_size" in cfg or "mlp_dim" in cfg:
        return APPS["vit"]
    if "mask_tokens" in cfg or "vocab_size" in cfg:
        return APPS["bert"]
    raise refuse("hidden_size", cfg.get("hidden_size"), "not a configuration of the PyTorch BERT or ViT examples")


def convert(cfg: Mapping[str, Any], app: App, draft: Draft) -> Draft:
    """Fill ``draft`` from one resolved configuration of ``app``."""
    app.model(draft, cfg)
    rest = {k: v for k, v in cfg.items() if k not in MODEL_KEYS}
    classify(draft, rest, app.rules, UNMODELLED)
    app.finish(draft, cfg)
    return draft


# ------------------------------------------------------------------------------------------------ benchmarks
SCRIPTS = {"train_gpt2.py": "gpt2", "inference_gpt2.py": "gpt2", "pretrain.py": "vit", "finetune.py": "vit",
           "validation.py": "vit"}
POPRUN = {"num_replicas": "replication_factor", "num_instances": "_num_instances",
          "ipus_per_replica": "ipus_per_replica"}


def parse_command(cmd: str) -> Tuple[str, Dict[str, Any], Dict[str, Any]]:
    """``[poprun FLAGS] python SCRIPT FLAGS`` -> (script, the script's flags, poprun's flags); values as YAML
    scalars, several values as a list, a bare flag as true."""
    import yaml

    words = shlex.split(cmd)
    script_at = next((i for i, w in enumerate(words) if w.endswith(".py")), None)
    if script_at is None:
        raise refuse("cmd", cmd.split()[0] if cmd.split() else cmd, "allowed: a command running a Python script")
    launcher = words[:script_at]
    poprun = _flags([w for w in launcher if w.startswith("--") and not w.startswith("--mpi")]) \
        if launcher and launcher[0] == "poprun" else {}
    flags = _flags(words[script_at + 1:])
    parsed = {k: [yaml.safe_load(x) for x in v] if isinstance(v, list) else (yaml.safe_load(v) if isinstance(v, str)
              else v) for k, v in flags.items()}
    parsed = {k: (v[0] if isinstance(v, list) and len(v) == 1 else v) for k, v in parsed.items()}
    pop = {k: yaml.safe_load(v) if isinstance(v, str) else v for k, v in poprun.items()}
    return Path(words[script_at]).name, parsed, pop


def _flags(words: List[str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    key = None
    for w in words:
        if w.startswith("--"):
            name, eq, value = w[2:].partition("=")
            key = name.replace("-", "_")
            out[key] = value if eq else True
            if eq:
                key = None
        elif key is not None:
            prev = out[key]
            out[key] = w if prev is True else (prev + [w] if isinstance(prev, list) else [prev, w])
    return out


def convert_benchmark(entry: Mapping[str, Any], name: str, configs: Optional[Mapping[str, Any]],
                      draft: Draft) -> Draft:
    """One ``benchmarks.yml`` entry: the named configuration (if any) with the command line's flags on top."""
    script, flags, poprun = parse_command(str(entry.get("cmd", "")))
    app = APPS.get(SCRIPTS.get(script, ""))
    if app is None:
        raise refuse("cmd", script, f"allowed: a script of the PyTorch examples ({', '.join(SCRIPTS)})")
    cfg: Dict[str, Any] = {}
    if "config" in flags:
        if configs is None or flags["config"] not in configs:
            raise refuse("config", flags["config"], "allowed: a configuration of the configs file beside this file")
        cfg.update(configs[flags["config"]])
    cfg.update(flags)
    for flag, key in POPRUN.items():
        if flag in poprun:
            cfg[key] = poprun[flag]
            if key == "replication_factor":
                draft.notes["_poprun"] = f"poprun --num-replicas={poprun[flag]}"
    instances = cfg.pop("_num_instances", None)
    if script.startswith("inference"):
        draft.set("training", False, f"{script}: inference")
    if app.name == "gpt2":
        cfg.setdefault("model", "gpt2")
    convert(cfg, app, draft)
    if "_poprun" in draft.notes:
        draft.notes["options.replication_factor"] = draft.notes.pop("_poprun")
    if instances is not None:
        draft.set("options.num_instances", as_int("num_instances", instances), f"poprun --num-instances={instances}")
    return draft
