"""Graphcore's PopART BERT application: its JSON configurations (graphcore/examples
``applications/popart/bert/configs/mk2/*.json``) and those of Graphcore's MLPerf Training BERT submissions, both read
by ``bert.py --config``.

Keys are the application's argument-parser options (``utils/options.py``); what ``bert.py`` sets in code
(``bert_session_options``) and the parser's defaults for keys a file leaves out are cited line by line.
"""
from __future__ import annotations

from typing import Any, Mapping

from ipuexp.importers.mapping import (PACKING_FACTOR, Draft, accumulation_from_global, as_bool, as_float, as_int,
                                             as_int_list, as_proportion, bert, choose, classify,
                                             heads_back_on_first_ipu, mask_tokens, refuse, to)

TITLE = "Graphcore's BERT example (PopART)"
# Packed sequences (several short sequences in one row of sequence_length tokens): data.packing.
PACKING = ("use_packed_sequence_format", "use_prepacked_pretraining_dataset")
MAX_SEQUENCES_DEFAULT = 1
"""The MLPerf parser's default ``max_sequences_per_pack`` (BertConfig in bert_model.py)."""


def _task(draft: Draft, key: str, value: Any) -> None:
    if str(value).upper() != "PRETRAINING":
        raise refuse(key, value, "allowed: PRETRAINING (the zoo's BERT has the MLM and NSP heads only; a task head "
                     "such as SQuAD span prediction is not in the zoo)")
    draft.skip(key)


def _execution(draft: Draft, key: str, value: Any) -> None:
    pipelined = as_bool(key, value) if key == "pipeline" else str(value).upper() == "PIPELINE"
    if not pipelined:
        raise refuse(key, value, "allowed: " + ("true" if key == "pipeline" else "PIPELINE") +
                     " (ipuexp models pipelined execution; phased and sharded execution are not modelled)")
    draft.set("options.recomputation.mode", "pipeline",
              f"{key}: {value}: bert.py enablePipelining with autoRecomputation = RecomputationType.Pipeline")


RULES = {
    "task": _task,
    "micro_batch_size": to("data.micro_batch_size", as_int),
    "batch_size": to("data.micro_batch_size", as_int),
    "replication_factor": to("options.replication_factor", as_int),
    "gradient_accumulation_factor": to("options.gradient_accumulation", as_int),
    "global_batch_size": lambda d, k, v: d.set("_global_batch", as_int(k, v)),
    "batches_per_step": to("options.device_iterations", as_int),
    "available_memory_proportion": to("options.available_memory_proportion", as_proportion),
    "enable_half_partials": to("options.partials_type", lambda k, v: "half" if as_bool(k, v) else "float"),
    "popart_dtype": to("options.precision", lambda k, v: choose(k, v, {"FLOAT16": "16.16", "FLOAT": "32.32"})),
    "stochastic_rounding": to("options.stochastic_rounding", as_bool),
    "optimizer_state_offchip": to("options.tensor_locations.optimizer_state.on_chip", lambda k, v: not as_bool(k, v)),
    "replicated_tensor_sharding": to("options.tensor_locations.optimizer_state.replicated_tensor_sharding", as_bool),
    "gradient_reduction_type": to("options.reduction_type", lambda k, v: choose(k, v, {"Mean": "mean", "Sum": "sum"})),
    "loss_scaling": to("options.loss_scaling", as_float),
    "embedding_serialization_vocab_steps": to("options.embedding_serialization_factor", as_int),
    "optimizer": to("optimizer.name", lambda k, v: choose(k, v, {"LAMB": "lamb", "LAMB_NO_BIAS": "lamb",
                                                                  "ADAM": "adam", "ADAM_NO_BIAS": "adam",
                                                                  "SGD": "sgd"})),
    "lamb_m_dtype": to("optimizer.state_precision", lambda k, v: choose(k, v, {"FLOAT16": "half", "FLOAT": "float"})),
    # The first moment's dtype; the MLPerf v2.0 submission renamed lamb_m_dtype to lamb_accl_dtype.
    "lamb_accl_dtype": to("optimizer.state_precision", lambda k, v: choose(k, v, {"FLOAT16": "half", "FLOAT": "float"})),
    "activation_checkpoint_dtype": to("options.stash_precision",
                                      lambda k, v: choose(k, v, {"FLOAT8": "float8", "FLOAT16": "half"})),
    "learning_rate": to("optimizer.learning_rate", as_float),
    "weight_decay": to("optimizer.weight_decay", as_float),
    "lr_bert_schedule": lambda d, k, v: d.set("optimizer.learning_rate", as_float(k, v.get("init_lr")),
                                              f"{k}.init_lr: {v.get('init_lr')}") if isinstance(v, dict) and
    "init_lr" in v else d.skip(k),
    "mask_tokens": lambda d, k, v: mask_tokens(k, v, d),
    "pipeline": _execution,
    "execution_mode": _execution,
    "seed": to("options.random_seed", as_int),
}
# Keys that change nothing ipuexp predicts: run length, learning-rate schedule and Adam/LAMB betas, data files and
# caching, logging, checkpoints, dropout. split_qkv computes the same products as one fused QKV matmul (PopART
# places the three on the same IPU), so it changes neither FLOPs nor weight bytes.
UNMODELLED = ("no_dropout", "no_attn_dropout", "training_steps", "steps_per_log", "aggregate_metrics_over_steps",
              "split_qkv", "beta1", "beta2", "learning_rate_function", "lr_warmup_steps", "lr_steps_per_decay_update",
              "input_files", "shuffle", "duplication_factor", "epochs_to_cache", "checkpoint_dir", "no_validation",
              "epochs", "epochs_per_save", "enable_tensorboard", "engine_cache", "tf_checkpoint",
              "on_the_spot_validation_files", "max_training_sequences", "submission_division",
              "submission_platform",
              # MLPerf submissions: how losses and accuracies are averaged, LAMB's beta1 schedule and gradient
              # clipping, the MLM decoder's bias, collectives merged into fewer calls, a linear-layer split that is
              # off, and reduce_nsp_overhead, which drops the NSP head (pooler and classifier on the pack's 3
              # sequence slots, a negligible share of a step).
              "loss_averaging_basis", "accuracy_averaging_basis", "beta1_schedule", "gradient_clipping_norm",
              "projection_bias", "merge_collectives", "split_linear_layers", "reduce_nsp_overhead")
MODEL_KEYS = ("num_layers", "hidden_size", "attention_heads", "sequence_length", "vocab_length", "layers_per_ipu",
              "encoder_start_ipu", "att_ffn_placement", "encoder_start_pipeline_stage", "max_sequences_per_pack",
              "avg_seq_per_pack") + PACKING


def convert(cfg: Mapping[str, Any], draft: Draft) -> Draft:
    _packing(draft, cfg)
    bert(draft, ("hidden_size", cfg.get("hidden_size")), ("attention_heads", cfg.get("attention_heads")),
         ("num_layers", cfg["num_layers"]) if "num_layers" in cfg else None,
         ("sequence_length", cfg.get("sequence_length", 128)),
         ("vocab_length", cfg["vocab_length"]) if "vocab_length" in cfg else None)
    classify(draft, {k: v for k, v in cfg.items() if k not in MODEL_KEYS}, RULES, UNMODELLED)
    if "att_ffn_placement" in cfg:
        _halves_placement(draft, cfg)
    else:
        _placement(draft, cfg)
    accumulation_from_global(draft, "global_batch_size", "micro_batch_size x replication_factor")
    # utils/options.py defaults for keys the file leaves out, and what bert_session_options sets in code.
    draft.default("options.device_iterations", 1, "options.py: --batches-per-step default 1")
    draft.default("options.precision", "16.16", "options.py: --popart-dtype default FLOAT16")
    draft.default("options.partials_type", "float", "options.py: --enable-half-partials default False")
    draft.default("options.stochastic_rounding", False, "options.py: --stochastic-rounding default False")
    draft.default("options.reduction_type", "sum", "options.py: --gradient-reduction-type default Sum")
    draft.default("options.tensor_locations.optimizer_state.on_chip", True,
                  "options.py: --optimizer-state-offchip default False")
    draft.default("options.pipeline.schedule", "grouped", "bert.py: PopART's pipelining (one schedule)")
    draft.set("host.framework", "popart", "PopART session.run per step, then updateOptimizerFromHost (the LR schedule has an entry for every step)")
    # bert.py bert_session_patterns: with recompute_checkpoint_every_layer (options.py default True) each encoder
    # layer's output is a recomputation checkpoint.
    if draft.values.get("options.recomputation.mode") == "pipeline":
        draft.default("options.recomputation.checkpoint_every_layer", True,
                      "options.py: --recompute-checkpoint-every-layer default True")
    return draft


def _placement(draft: Draft, cfg: Mapping[str, Any]) -> None:
    """bert.py: the embedding on IPU 0, ``layers_per_ipu`` encoder layers on the IPUs from ``encoder_start_ipu``,
    and the MLM and NSP heads in the last pipeline stage on the embedding's IPU (the MLM head shares the word
    embedding)."""
    if "layers_per_ipu" not in cfg:
        raise refuse("layers_per_ipu", None, "allowed: the encoder layers on each IPU (a pipelined configuration)")
    start = as_int("encoder_start_ipu", cfg.get("encoder_start_ipu", 1))
    if start not in (0, 1):
        raise refuse("encoder_start_ipu", start, "allowed: 0 or 1 (the embedding's IPU or the next one)")
    lpi = [0] * start + as_int_list("layers_per_ipu", cfg["layers_per_ipu"])
    if any(n < 0 for n in lpi):
        raise refuse("layers_per_ipu", cfg["layers_per_ipu"], "allowed: encoder layers per IPU, each >= 0")
    if sum(lpi) != int(draft.values.get("model.num_layers") or _layers(draft)):
        raise refuse("layers_per_ipu", cfg["layers_per_ipu"], f"allowed: layers summing to num_layers "
                     f"({cfg.get('num_layers')})")
    draft.set("options.pipeline.layers_per_ipu", lpi, f"layers_per_ipu: {cfg['layers_per_ipu']}, encoder_start_ipu: "
              f"{start}" + (" (embedding alone on IPU 0)" if start else ""))
    draft.set("options.pipeline.device_mapping", heads_back_on_first_ipu(lpi),
              "bert.py: MLM and NSP heads in the last stage on the embedding's IPU 0 (tied word embedding)")


def _packing(draft: Draft, cfg: Mapping[str, Any]) -> None:
    """Packed data (``use_prepacked_pretraining_dataset``, ``use_packed_sequence_format``): the pack's sequences at
    most (the file's, else the parser's default) and on average. The application counts the sequences of every
    step's packs; the file's ``avg_seq_per_pack`` only scales the global batch it logs, so the average is that of
    Graphcore's packed Wikipedia at the file's sequence length (``PACKING_FACTOR``)."""
    key = next((k for k in PACKING if k in cfg and as_bool(k, cfg[k])), None)
    for name in ("max_sequences_per_pack", "avg_seq_per_pack"):
        if name in cfg and key is None:
            draft.skip(name)  # packing keys of a configuration that does not pack
    if key is None:
        return
    seq = as_int("sequence_length", cfg.get("sequence_length", 128))
    if seq not in PACKING_FACTOR:
        raise refuse("sequence_length", seq, f"allowed with {key}: {', '.join(map(str, PACKING_FACTOR))} (the "
                     "lengths Graphcore published a packing factor for)")
    most = as_int("max_sequences_per_pack", cfg.get("max_sequences_per_pack", MAX_SEQUENCES_DEFAULT))
    given = f"max_sequences_per_pack: {cfg['max_sequences_per_pack']}" if "max_sequences_per_pack" in cfg else \
        f"bert_model.py: max_sequences_per_pack default {MAX_SEQUENCES_DEFAULT}"
    draft.set("data.packing.max_sequences_per_pack", most, f"{key}: true, {given}")
    draft.set("data.packing.avg_sequences_per_pack", min(PACKING_FACTOR[seq], float(most)),
              f"Graphcore's packed Wikipedia at {seq} tokens (configs_pretraining.yml packing_factor); "
              "throughput counts sequences")


def _halves_placement(draft: Draft, cfg: Mapping[str, Any]) -> None:
    """MLPerf BERT v1.1 and later: ``att_ffn_placement`` lists, in pipeline order, each stage's IPU and how many
    attention and feed-forward halves of consecutive layers it holds (att0, ffn0, att1, ...); stages before
    ``encoder_start_pipeline_stage`` hold the embedding on IPU 0, and the heads join the last stage."""
    key = "att_ffn_placement"
    placement = cfg[key]
    start = as_int("encoder_start_pipeline_stage", cfg.get("encoder_start_pipeline_stage", 1))
    if start < 0:
        raise refuse("encoder_start_pipeline_stage", start, "allowed: an integer >= 0 (the pipeline stages before "
                     "the first encoder stage, which hold the embedding)")
    allowed = ("allowed: [[ipu, [attention halves, feed-forward halves]], ...] in pipeline order, IPU indices and "
               "counts >= 0, the halves of consecutive layers alternating (attention first) and adding up to "
               "num_layers each")
    try:
        stages = [(int(ipu), int(att), int(ffn)) for ipu, (att, ffn) in placement]
    except (TypeError, ValueError):
        raise refuse(key, placement, allowed) from None
    if not stages or any(min(stage) < 0 for stage in stages):
        raise refuse(key, placement, allowed)
    halves, lpi, ipus = 0, [0] * start, [0] * start
    for ipu, att, ffn in stages:
        count = att + ffn
        # Halves h .. h+count-1: the even ones are attention, the odd ones feed-forward.
        if (count + (halves % 2 == 0)) // 2 != att or att + ffn != count:
            raise refuse(key, placement, allowed)
        halves += count
        lpi.append(count)
        ipus.append(ipu)
    layers = int(draft.values.get("model.num_layers") or _layers(draft))
    if halves != 2 * layers:
        raise refuse(key, placement, f"{allowed} ({layers} layers: {2 * layers} halves, not {halves})")
    note = f"{key}: {placement}, encoder_start_pipeline_stage: {start}"
    first = ("; the embedding alone first, on IPU 0" if start == 1 else
             f"; the embedding alone in the first {start} stages, on IPU 0" if start else
             f"; the embedding in the first stage, with its halves, on IPU {ipus[0]}")
    last = f"IPU {ipus[-1]}" + (", the embedding's" if ipus[-1] == 0 else "")
    draft.set("options.pipeline.split_layers", True, f"{key}: attention and feed-forward halves placed apart")
    draft.set("options.pipeline.layers_per_ipu", lpi, note + f" (halves per stage{first})")
    draft.set("options.pipeline.device_mapping", ipus, note + f" (the MLM and NSP heads in the last stage, on {last})")


def _layers(draft: Draft) -> int:
    from ipuexp.importers.mapping import zoo_layers

    return zoo_layers("bert", draft.values["model.size"])

