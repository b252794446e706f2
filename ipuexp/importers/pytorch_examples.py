"""Graphcore's PyTorch example applications: BERT and ViT ``configs*.yml`` and the ``benchmarks.yml`` command lines
of ViT and GPT-2 (graphcore/examples ``nlp/bert/pytorch``, ``vision/vit/pytorch``, ``nlp/gpt2/pytorch``).

A configuration file holds named configurations that inherit with YAML merge keys (``<<: *defaults``); the
application reads one (``--config NAME``), lets command-line flags override it (``--flag-name value`` is the key
``flag_name``) and sets the rest in code (``ipu_options.py``). The values the application sets in code, or takes
from its argument parser when the file is silent, are each application's ``code`` (``pytorch_bert``,
``pytorch_vit``, ``pytorch_gpt2``), with their citations; the keys the applications share are in ``pytorch_app``.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from ipuexp.importers.command_line import parse_command
from ipuexp.importers.mapping import Draft, as_int, classify, refuse
from ipuexp.importers.pytorch_app import UNMODELLED, App
from ipuexp.importers.pytorch_bert import BertApp
from ipuexp.importers.pytorch_gpt2 import Gpt2App
from ipuexp.importers.pytorch_vit import VitApp

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
# poprun's flags as the application keys they stand for; the instance count is no application key and is set after
# the configuration is converted.
POPRUN = {"num_replicas": "replication_factor", "num_instances": "_num_instances",
          "ipus_per_replica": "ipus_per_replica"}


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
