"""Graphcore's BERT example (PyTorch, graphcore/examples ``nlp/bert/pytorch``): the keys its ``configs*.yml`` add to
the PyTorch applications' shared ones, and what it sets in code (``run_pretraining.py``, ``ipu_options.py``,
``modeling.py``).
"""
from __future__ import annotations

from typing import Any, Mapping

from ipuexp.importers.mapping import PACKING_FACTOR, Draft, as_bool, as_int, choose, refuse, to
from ipuexp.importers.pytorch_app import COMMON, RECOMPUTE, App, heads_on_first_ipu, zoo_transformer


DATASETS = ("pretraining", "generated", "squad")
"""What the application trains: pre-training (MLM and NSP heads, the zoo's BERT) or SQuAD fine-tuning (run_squad.py:
Transformers' BertForQuestionAnswering, the span head, which ``model=hf`` runs with ``question-answering``)."""
SQUAD_NOTE = "dataset: squad: run_squad.py fine-tunes Transformers' BertForQuestionAnswering (span prediction)"


class BertApp(App):
    name, title, family = "bert", "Graphcore's BERT example (PyTorch)", "bert"
    rules = {
        **COMMON,
        "optimizer": to("optimizer.name", lambda k, v: choose(k, v, {"AdamW": "adamw", "Adam": "adam", "LAMB": "lamb",
                                                                        "LAMBNoBiasCorrection": "lamb", "SGD": "sgd"})),
        "vocab_size": to("model.vocab_size", as_int),
        "sequence_length": to("model.sequence_length", as_int),
        # squad picks the model (``model``); pre-training data changes nothing the emulator predicts.
        "dataset": lambda d, k, v: None if str(v) == "squad" else d.skip(k) if str(v) in DATASETS else _no_head(k, v),
        "packed_data": lambda d, k, v: d.skip(k),  # read with max_sequences_per_pack in model()
    }
    code = (
        ("options.precision", "16.16", "run_pretraining.py: the model is cast to half (.half())"),
        ("options.stochastic_rounding", True, "ipu_options.py: Precision.enableStochasticRounding(True)"),
        ("options.recomputation.mode", "pipeline", RECOMPUTE),
        ("options.pipeline.schedule", "grouped", "ipu_options.py: PipelinedExecution(AutoStage.AutoIncrement)"),
        ("options.pipeline.auto_stage", "auto_increment",
         "ipu_options.py: AutoStage.AutoIncrement; PopART merges each IPU's consecutive stages"),
        ("options.output_mode", "sum", "ipu_options.py: outputMode(Sum)"),
        ("options.reduction_type", "mean", "ipu_options.py: accumulationAndReplicationReductionType(Mean)"),
    )

    def model(self, draft: Draft, cfg: Mapping[str, Any]) -> None:
        zoo_transformer(draft, cfg, "bert", {"hidden": "hidden_size", "heads": "num_attention_heads"},
                        "num_hidden_layers")
        dataset = str(cfg.get("dataset", "pretraining"))
        if dataset not in DATASETS:
            _no_head("dataset", cfg["dataset"])
        if dataset == "squad":
            size = draft.values.pop("model.size")
            dims = draft.notes.pop("model.size", "")
            draft.set("model.name", "hf", SQUAD_NOTE)
            draft.set("model.hf.config", f"bert-{size}-uncased", f"{dims}: BERT-{size.capitalize()}, uncased vocabulary "
                      "(the checkpoint run_squad.py starts from)")
            draft.set("model.hf.task", "question-answering", SQUAD_NOTE)
            return
        seq = as_int("sequence_length", cfg.get("sequence_length", 128))
        if "mask_tokens" in cfg:
            from ipuexp.models.bert import mask_tokens_for

            if as_int("mask_tokens", cfg["mask_tokens"]) != mask_tokens_for(seq):
                raise refuse("mask_tokens", cfg["mask_tokens"], f"allowed: {mask_tokens_for(seq)} for sequence "
                             f"length {seq} (the zoo's BERT masks Graphcore's published count)")
        _packing(draft, cfg, seq)

    def finish(self, draft: Draft, cfg: Mapping[str, Any]) -> None:
        super().finish(draft, cfg)
        if str(cfg.get("dataset", "pretraining")) == "squad":
            return  # modeling.py: the span head (QA outputs) stays with the last layers, on the last IPU
        heads_on_first_ipu(draft, "modeling.py: pooler and MLM/NSP heads back on IPU 0, tied to the word embedding")


def _no_head(key: str, value: Any) -> None:
    raise refuse(key, value, f"allowed: {', '.join(DATASETS)} (the pre-training heads, or SQuAD's span head through "
                 "model=hf)")


def _packing(draft: Draft, cfg: Mapping[str, Any], seq: int) -> None:
    """``packed_data: True``: packs of at most ``max_sequences_per_pack`` sequences, ``PACKING_FACTOR`` on average.
    (The application counts sequences too: run_pretraining.py multiplies packs/s by each step's sequences per
    pack.)"""
    if not as_bool("packed_data", cfg.get("packed_data", False)):
        return
    if "max_sequences_per_pack" not in cfg:
        raise refuse("packed_data", cfg["packed_data"], "allowed: false, or true with max_sequences_per_pack")
    if seq not in PACKING_FACTOR:
        raise refuse("sequence_length", seq, f"allowed with packed_data: {', '.join(map(str, PACKING_FACTOR))} "
                     "(the lengths Graphcore published a packing factor for)")
    draft.set("data.packing.max_sequences_per_pack", as_int("max_sequences_per_pack", cfg["max_sequences_per_pack"]),
              f"packed_data: True, max_sequences_per_pack: {cfg['max_sequences_per_pack']}")
    draft.set("data.packing.avg_sequences_per_pack", PACKING_FACTOR[seq],
              f"configs_pretraining.yml packing_factor at sequence length {seq}")
