"""Graphcore's ViT example (PyTorch, graphcore/examples ``vision/vit/pytorch``): the keys its ``configs.yml`` add to
the PyTorch applications' shared ones, and what it sets in code or takes from its argument parser (``args.py``,
``ipu_options.py``, ``pipeline_model.py``).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from ipuexp.importers.mapping import Draft, as_bool, as_float, as_int, choose, refuse, to
from ipuexp.importers.pytorch_app import COMMON, RECOMPUTE, App, half_or_float, zoo_transformer


def _dataset(draft: Draft, key: str, value: Any) -> None:
    if str(value) not in ("imagenet1k", "imagenet", "cifar10", "generated"):
        raise refuse(key, value, "allowed: imagenet1k, cifar10, generated")
    draft.skip(key)


class VitApp(App):
    name, title, family = "vit", "Graphcore's ViT example (PyTorch)", "vit"
    rules = {
        **COMMON,
        "enable_rts": to("options.tensor_locations.optimizer_state.replicated_tensor_sharding", as_bool),
        "prefetch_depth": to("options.io.prefetch_depth", as_int),
        "precision": to("options.precision", lambda k, v: choose(k, v, {"16.16": "16.16", "16.32": "16.32",
                                                                       "32.32": "32.32"})),
        "stochastic_rounding": to("options.stochastic_rounding", as_bool),
        "half_partials": to("options.partials_type", half_or_float),
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
        "dataset": _dataset,
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
        zoo_transformer(draft, cfg, "vit", {"hidden": "hidden_size", "heads": "num_attention_heads", "ffn": "mlp_dim",
                                            "patch": ("patches_size", as_int("patches_size", patch))},
                        "num_hidden_layers")

    def finish(self, draft: Draft, cfg: Mapping[str, Any]) -> None:
        if draft.values.get("optimizer.name") == "sgd_momentum" and not draft.values.get("optimizer.momentum"):
            draft.set("optimizer.name", "sgd", "optimizer: SGD without momentum")
        super().finish(draft, cfg)


def cfg_first(draft: Draft) -> Optional[str]:
    """The first-order optimizer state's precision as set so far."""
    return draft.values.get("optimizer.state_precision")


def _mixed_state(key: str, value: Any) -> None:
    raise refuse(key, value, "allowed: fp32, or fp16 with first_order_type fp16 (ipuexp keeps one optimizer-state "
                 "precision)")
