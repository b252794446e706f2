"""Graphcore's TensorFlow 1 BERT application: its JSON configurations (graphcore/examples
``applications/tensorflow/bert/configs/*.json``, read by ``run_pretraining.py --config``).

Every key of the file is one of the application's argument-parser options (``bert.py``/``options.py``); the
values it sets in code when a file is silent are ``CODE`` below, with their citations.
"""
from __future__ import annotations

from typing import Any, Mapping

from ipuexp.importers.mapping import (Draft, as_bool, as_float, as_int, as_proportion, bert, bert_ffn, choose,
                                             classify, mask_tokens, only, refuse, stages_of_names,
                                             to)

TITLE = "Graphcore's BERT example (TensorFlow 1)"
# Block names of ``pipeline_stages`` (modeling.py): embeddings, encoder layers, the pretraining heads.
LAYER, BEFORE, AFTER = "hid", ("emb", "pos"), ("mlm", "nsp")


def _off(draft: Draft, key: str, value: Any) -> None:
    draft.set("options.tensor_locations.optimizer_state.on_chip", not as_bool(key, value),
              f"{key}: {value}" + (" (weight-update variables in Streaming Memory)" if as_bool(key, value) else ""))


def _recompute(draft: Draft, key: str, value: Any) -> None:
    on = as_bool(key, value)
    draft.set("options.recomputation.mode", "pipeline" if on else "none",
              f"{key}: {value}" + (" (each pipeline stage recomputes its forward pass)" if on else ""))
    if on:
        draft.set("options.recomputation.checkpoint_every_layer", True,
                  "modeling.py encoder(): a recomputation_checkpoint after every encoder layer")


def _task(draft: Draft, key: str, value: Any) -> None:
    if str(value).lower() != "pretraining":
        raise refuse(key, value, "allowed: pretraining (the zoo's BERT has the MLM and NSP heads only; a task head "
                     "such as SQuAD span prediction is not in the zoo)")
    draft.skip(key)



def _warn(text: str):
    def rule(draft: Draft, key: str, value: Any) -> None:
        draft.warnings.append(f"{key}={value}: {text}")
    return rule


RULES = {
    "task": _task,
    "micro_batch_size": to("data.micro_batch_size", as_int),
    "replicas": to("options.replication_factor", as_int),
    "gradient_accumulation_count": to("options.gradient_accumulation", as_int),
    "batches_per_step": to("options.device_iterations", as_int),
    "available_memory_proportion": to("options.available_memory_proportion", as_proportion),
    "partials_type": to("options.partials_type", lambda k, v: choose(k, v, {"half": "half", "float": "float"})),
    "precision": to("options.precision", lambda k, v: choose(k, v, {"16": "16.16", "32": "32.32"})),
    "stochastic_rounding": to("options.stochastic_rounding", as_bool),
    "enable_recomputation": _recompute,
    "variable_offloading": _off,
    "replicated_tensor_sharding": to("options.tensor_locations.optimizer_state.replicated_tensor_sharding", as_bool),
    "pipeline_schedule": to("options.pipeline.schedule", lambda k, v: choose(k, v, {
        "Grouped": "grouped", "Interleaved": "interleaved", "Sequential": "sequential"})),
    "reduction_type": to("options.reduction_type", lambda k, v: choose(k, v, {"mean": "mean", "sum": "sum"})),
    "loss_scaling": to("options.loss_scaling", as_float),
    "matmul_serialize_factor": to("options.embedding_serialization_factor", as_int),
    "seed": to("options.random_seed", as_int),
    "optimizer": to("optimizer.name", lambda k, v: choose(k, v, {"lamb": "lamb", "adam": "adam",
                                                                  "momentum": "sgd_momentum", "sgd": "sgd"})),
    "base_learning_rate": to("optimizer.learning_rate", as_float),
    "weight_decay_rate": to("optimizer.weight_decay", as_float),
    "max_predictions_per_seq": lambda d, k, v: mask_tokens(k, v, d),
    "intermediate_size": lambda d, k, v: (bert_ffn(k, v, d), d.skip(k)),
    "hidden_act": only("gelu", "the zoo's BERT uses GELU"),
    "no_outlining": only(False, "ipuexp models outlined code, the application's default"),
    # The zoo's MLM head keeps BERT's transform layer: one hidden x hidden matmul over the masked tokens more than
    # a file without it, a small part of a step; a warning, not a refusal.
    "use_cls_layer": lambda d, k, v: d.skip(k) if as_bool(k, v) else _warn(
        "the zoo's MLM head keeps its transform layer (one hidden x hidden matmul over the masked tokens)")(d, k, v),
}
# Keys that change nothing ipuexp predicts: run length, learning-rate schedule, data files, logging and checkpoints,
# dropout, initialisation. use_qkv_split computes the same products as one fused matmul; use_attention_projection_bias
# is hidden parameters per layer; min_remote_tensor_size is a byte threshold for Streaming Memory (ipuexp keeps
# PopTorch's element thresholds, which leave the same large optimizer states off chip).
UNMODELLED = ("attention_probs_dropout_prob", "hidden_dropout_prob", "initializer_range", "max_position_embeddings",
              "type_vocab_size", "use_attention_projection_bias", "use_qkv_split", "num_train_steps", "epsilon",
              "lr_schedule", "warmup", "parallel_io_threads", "fp_exceptions", "steps_per_tensorboard",
              "steps_per_ckpts", "steps_per_logs", "duplicate_factor", "min_remote_tensor_size", "init_checkpoint",
              "restore_dir", "save_path", "static_mask", "train_file")
MODEL_KEYS = ("hidden_size", "num_attention_heads", "num_hidden_layers", "seq_length", "vocab_size",
              "pipeline_stages", "device_mapping")


def convert(cfg: Mapping[str, Any], draft: Draft) -> Draft:
    bert(draft, ("hidden_size", cfg.get("hidden_size")), ("num_attention_heads", cfg.get("num_attention_heads")),
         ("num_hidden_layers", cfg["num_hidden_layers"]) if "num_hidden_layers" in cfg else None,
         ("seq_length", cfg.get("seq_length", 128)), ("vocab_size", cfg["vocab_size"]) if "vocab_size" in cfg else None)
    classify(draft, {k: v for k, v in cfg.items() if k not in MODEL_KEYS}, RULES, UNMODELLED)
    if "pipeline_stages" in cfg:
        layers, ipus = stages_of_names("pipeline_stages", cfg["pipeline_stages"], cfg.get("device_mapping"), LAYER,
                                       BEFORE, AFTER)
        draft.set("options.pipeline.layers_per_ipu", layers, "pipeline_stages: encoder layers ('hid') per stage")
        draft.set("options.pipeline.device_mapping", ipus, f"device_mapping: {cfg.get('device_mapping')}")
    # Values the application sets when the file is silent (options.py argument defaults).
    draft.default("options.device_iterations", 1, "options.py: --batches-per-step default 1")
    draft.default("options.precision", "16.16", "options.py: --precision default 16")
    draft.default("options.pipeline.schedule", "grouped", "options.py: --pipeline-schedule default Grouped")
    draft.set("host.framework", "tensorflow", "TensorFlow 1 for IPU: infeed/outfeed queues, the loop on the device")
    return draft
