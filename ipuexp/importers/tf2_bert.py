"""Graphcore's TensorFlow 2 BERT application: its JSON configurations (graphcore/examples
``nlp/bert/tensorflow2/configs/*.json``, read by ``run_pretraining.py --config``) and the command lines of its
``benchmarks.yml`` that name one.

The file's sections (``bert_config``, ``global_batch``, ``ipu_config``, ``optimizer_opts``) are the application's
pydantic options (``utilities/options.py``); the values it takes when a file is silent are cited line by line.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Mapping

from ipuexp.importers.command_line import parse_command
from ipuexp.importers.mapping import (Draft, as_bool, as_float, as_int, as_proportion, bert, bert_ffn, choose,
                                             classify, mask_tokens, only, refuse, stages_of_names,
                                             to)

TITLE = "Graphcore's BERT example (TensorFlow 2)"
# Block names of ipu_config.pipeline_stages (model/pipeline_stage_names.py): embeddings, encoder layers, and the
# encoder output, pooler and pretraining heads.
LAYER, BEFORE, AFTER = "hid", ("emb",), ("enc_out", "pool", "heads")
SCRIPTS = {"run_pretraining.py": "pretraining"}



RULES = {
    "max_seq_length": lambda d, k, v: None,
    "max_predictions_per_seq": lambda d, k, v: mask_tokens(k, v, d),
    "bert_config.intermediate_size": lambda d, k, v: (bert_ffn(k, v, d), d.skip(k)),
    "bert_config.position_embedding_type": only("absolute", "the zoo's BERT has absolute position embeddings"),
    "global_batch.micro_batch_size": to("data.micro_batch_size", as_int),
    "global_batch.replicas": to("options.replication_factor", as_int),
    "global_batch.grad_acc_steps_per_replica": to("options.gradient_accumulation", as_int),
    "ipu_config.matmul_available_memory_proportion_per_pipeline_stage":
        to("options.available_memory_proportion", as_proportion),
    "ipu_config.replicated_tensor_sharding":
        to("options.tensor_locations.optimizer_state.replicated_tensor_sharding", as_bool),
    "ipu_config.matmul_partials_type": to("options.partials_type", lambda k, v: choose(k, v, {"half": "half",
                                                                                             "float": "float"})),
    "ipu_config.enable_stochastic_rounding": to("options.stochastic_rounding", as_bool),
    "ipu_config.pipeline_stages": lambda d, k, v: None,
    "ipu_config.pipeline_device_mapping": lambda d, k, v: None,
    "optimizer_opts.name": to("optimizer.name", lambda k, v: choose(k, v, {"LAMB": "lamb", "AdamW": "adamw",
                                                                            "Adam": "adam", "SGD": "sgd"})),
    "optimizer_opts.weight_decay_rate": to("optimizer.weight_decay", as_float),
    "optimizer_opts.loss_scaling": to("options.loss_scaling", as_float),
    "optimizer_opts.learning_rate.max_learning_rate": to("optimizer.learning_rate", as_float),
    "embedding_serialization_factor": to("options.embedding_serialization_factor", as_int),
    "seed": to("options.random_seed", as_int),
}
# Keys that change nothing ipuexp predicts: data paths and length of the run, the learning-rate schedule, logging,
# dropout and initialisation, the position table's size (the zoo's 512), the segment vocabulary.
UNMODELLED = ("dataset_dir", "bert_config.hidden_dropout_prob", "bert_config.attention_probs_dropout_prob",
              "bert_config.max_position_embeddings", "bert_config.type_vocab_size", "bert_config.initializer_range",
              "bert_config.layer_norm_eps", "optimizer_opts.learning_rate.schedule_name",
              "optimizer_opts.learning_rate.warmup_frac", "global_batches_per_log", "enable_wandb", "wandb_tags",
              "show_accuracy", "total_num_train_samples", "save_ckpt_path", "pretrained_ckpt_path",
              "wandb_entity", "wandb_entity_name", "config")
MODEL_KEYS = ("bert_config.hidden_size", "bert_config.num_attention_heads", "bert_config.num_hidden_layers",
              "bert_config.vocab_size")


def flatten(cfg: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    """Nested sections as dotted keys (``ipu_config.pipeline_stages``); lists stay values."""
    out: Dict[str, Any] = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def convert(cfg: Mapping[str, Any], draft: Draft) -> Draft:
    flat = flatten(cfg)
    bert(draft, ("bert_config.hidden_size", flat.get("bert_config.hidden_size")),
         ("bert_config.num_attention_heads", flat.get("bert_config.num_attention_heads")),
         ("bert_config.num_hidden_layers", flat["bert_config.num_hidden_layers"])
         if "bert_config.num_hidden_layers" in flat else None,
         ("max_seq_length", flat.get("max_seq_length", 128)),
         ("bert_config.vocab_size", flat["bert_config.vocab_size"]) if "bert_config.vocab_size" in flat else None)
    classify(draft, {k: v for k, v in flat.items() if k not in MODEL_KEYS}, RULES, UNMODELLED)
    if "ipu_config.pipeline_stages" in flat:
        layers, ipus = stages_of_names("ipu_config.pipeline_stages", flat["ipu_config.pipeline_stages"],
                                       flat.get("ipu_config.pipeline_device_mapping"), LAYER, BEFORE, AFTER)
        draft.set("options.pipeline.layers_per_ipu", layers, "ipu_config.pipeline_stages: encoder layers ('hid') "
                  "per stage")
        draft.set("options.pipeline.device_mapping", ipus,
                  f"ipu_config.pipeline_device_mapping: {flat.get('ipu_config.pipeline_device_mapping')}")
    _code_defaults(draft)
    return draft


def _code_defaults(draft: Draft) -> None:
    """What the application sets when the file is silent (utilities/options.py defaults, run_pretraining.py)."""
    draft.default("options.device_iterations", 1,
                  "run_pretraining.py: steps_per_execution is one global batch (one weight update per host call)")
    draft.default("options.precision", "16.16", "run_pretraining.py: Keras mixed-precision policy float16")
    draft.default("options.partials_type", "half", "utilities/options.py: ipu_config.matmul_partials_type default half")
    draft.default("options.stochastic_rounding", False,
                  "utilities/options.py: ipu_config.enable_stochastic_rounding default false")
    draft.default("options.recomputation.mode", "pipeline",
                  "run_pretraining.py: pipelined model with recomputation of each stage (the application's "
                  "RecomputeAndBackpropagateInterleaved)")
    draft.default("options.recomputation.checkpoint_every_layer", True,
                  "convert_bert_model.py: add_recomputation_checkpoints_after = [TFBertLayer]")
    # Not set by the application, so TensorFlow's pipelining default applies: offload_weight_update_variables=None
    # places weight-update-only variables (the optimizer state) in on-chip or Streaming Memory automatically; LAMB's
    # two fp32 states of a BERT stage do not fit beside its weights, so the framework streams them.
    draft.default("options.tensor_locations.optimizer_state.on_chip", False,
                  "TensorFlow pipelining offload_weight_update_variables=None: LAMB's state in Streaming Memory")
    draft.default("options.tensor_locations.optimizer_state.replicated_tensor_sharding", False,
                  "utilities/options.py: ipu_config.replicated_tensor_sharding default false")
    draft.default("options.pipeline.schedule", "grouped", "TensorFlow pipelining default schedule Grouped")
    draft.set("host.framework", "tensorflow", "TensorFlow 2 for IPU: Keras fit with steps_per_execution on the device")
    draft.default("options.embedding_serialization_factor", 1,
                  "utilities/options.py: embedding_serialization_factor default 1")


# Scripts of the application that train a task head the zoo lacks.
TASK_SCRIPTS = {"run_squad.py": "SQuAD span prediction", "run_seq_classification.py": "GLUE sequence classification"}


def convert_benchmark(path: Path, entry: Mapping[str, Any], flags: Mapping[str, Any], draft: Draft) -> Draft:
    """One ``benchmarks.yml`` entry: the JSON file its ``--config`` names (beside the benchmarks file, as the
    application runs it) with the command line's flags on top."""
    import json

    script, _, _ = parse_command(str(entry["cmd"]))
    if script in TASK_SCRIPTS:
        raise refuse("cmd", script, f"allowed: run_pretraining.py (the zoo's BERT has the MLM and NSP heads only; "
                     f"a {TASK_SCRIPTS[script]} head is not in the zoo)")
    if "parameters" in entry or "{" in str(entry["cmd"]):
        raise refuse("parameters", entry.get("parameters"), "allowed: one command (this entry runs one per row of "
                     "parameters; import the configuration file it names)")
    name = flags.get("config")
    target = path.parent / str(name) if name else None
    if target is None or not target.is_file():
        raise refuse("config", name, f"allowed: a configuration file beside {path.name} (not found)")
    with open(target, encoding="utf-8") as f:
        cfg = json.load(f)
    draft.source = f"{draft.source} ({name})"
    return convert({**cfg, **{k: v for k, v in flags.items() if k != "config"}}, draft)
