"""Graphcore's GPT-2 example (PyTorch, graphcore/examples ``nlp/gpt2/pytorch``): the flags of its ``benchmarks.yml``
command lines beside the PyTorch applications' shared ones, and what it sets in code or takes from its argument
parser (``train_gpt2.py``, ``arguments.py``, ``ipu_options.py``).
"""
from __future__ import annotations

from typing import Any, Mapping

from ipuexp.importers.mapping import Draft, as_int, choose, refuse, to
from ipuexp.importers.pytorch_app import COMMON, RECOMPUTE, App, heads_on_first_ipu


def _dataset(draft: Draft, key: str, value: Any) -> None:
    if str(value) != "generated":
        raise refuse(key, value, "allowed: generated (ipuexp's analytic runs use synthetic data)")
    draft.set("data.dataset", "synthetic", f"{key}: {value}")


class Gpt2App(App):
    name, title, family = "gpt2", "Graphcore's GPT-2 example (PyTorch)", "gpt2"
    rules = {
        **COMMON,
        "batch_size": to("data.micro_batch_size", as_int),
        "max_len": to("model.sequence_length", as_int),
        "seed": to("options.random_seed", as_int),
        "optimizer": to("optimizer.name", lambda k, v: choose(k, v, {"AdamW": "adamw", "Adam": "adam",
                                                                        "LAMB": "lamb", "SGD": "sgd"})),
        "dataset": _dataset,
        "model": lambda d, k, v: None,
    }
    code = (
        ("options.precision", "16.16", "train_gpt2.py: GPT2Wrapper(...).half()"),
        ("options.stochastic_rounding", True, "ipu_options.py: Precision.enableStochasticRounding(True)"),
        ("options.recomputation.mode", "pipeline", RECOMPUTE),
        ("options.tensor_locations.optimizer_state.on_chip", False,
         "arguments.py: --optimizer-state-offchip default True"),
        ("options.pipeline.schedule", "grouped", "ipu_options.py: PipelinedExecution(AutoStage.AutoIncrement)"),
        ("options.pipeline.auto_stage", "auto_increment",
         "ipu_options.py: AutoStage.AutoIncrement; PopART merges each IPU's consecutive stages"),
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
        heads_on_first_ipu(draft, "train_gpt2.py: LM head, tied to the token embedding, back on IPU 0")
