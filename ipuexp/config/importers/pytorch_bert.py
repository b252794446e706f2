"""Graphcore's BERT example (PyTorch, graphcore/examples ``nlp/bert/pytorch``): the keys its ``configs*.yml`` add to
the PyTorch applications' shared ones, and what it sets in code (``run_pretraining.py``, ``ipu_options.py``,
``modeling.py``).
"""
from __future__ import annotations

from typing import Any, Mapping

from ipuexp.config.importers.mapping import Draft, as_bool, as_int, choose, refuse, to
from ipuexp.config.importers.pytorch_app import COMMON, RECOMPUTE, App, heads_on_first_ipu, zoo_transformer


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
        zoo_transformer(draft, cfg, "bert", {"hidden": "hidden_size", "heads": "num_attention_heads"},
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
        heads_on_first_ipu(draft, "modeling.py: pooler and MLM/NSP heads back on IPU 0, tied to the word embedding")


def _no_head(key: str, value: Any) -> None:
    raise refuse(key, value, "the zoo's BERT has the pretraining heads (MLM and NSP) only; allowed: pretraining, "
                 "generated (a task head such as SQuAD span prediction is not in the zoo)")


def _no_packing(key: str, value: Any) -> None:
    raise refuse(key, value, "allowed: false (packed sequences are not modelled)")
