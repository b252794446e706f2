"""Published configurations as ipuexp recipes: Optimum Graphcore ``ipu_config.json`` and the configuration files of
Graphcore's example applications and MLPerf Training submissions.

``read(path, config, source)`` returns the :class:`~ipuexp.importers.mapping.Draft` of one configuration;
``recipe.write`` turns it into ``./recipes/NAME.yaml``. One module per source format; Graphcore's PyTorch examples
have one per application (``pytorch_bert``, ``pytorch_vit``, ``pytorch_gpt2``, built on ``pytorch_app``), reached
through ``pytorch_examples``. ``mapping`` holds what all importers share, ``command_line`` reads the command of a
``benchmarks.yml`` entry.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from ipuexp.importers.mapping import Draft, as_int, refuse


def load_yaml(path: Path) -> Dict[str, Any]:
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except yaml.YAMLError as exc:  # one line with where it broke, not the parser's traceback
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise refuse("file", str(path), f"allowed: valid YAML (invalid{where}: {problem})") from None
    if not isinstance(data, dict):
        raise refuse("file", str(path), "allowed: a YAML mapping of named configurations")
    return data


def names(path: str | Path) -> List[str]:
    """The configurations a file holds (a JSON configuration is one, named after the file)."""
    path = Path(path)
    if path.suffix == ".json":
        return [path.stem]
    data = load_yaml(path)
    return [k for k, v in data.items() if isinstance(v, dict) and _is_config(v)]


def _is_config(entry: Dict[str, Any]) -> bool:
    """A named configuration, not an anchor of shared options (``train_options``, ``defaults``)."""
    return "cmd" in entry or any(k in entry for k in ("micro_batch_size", "batch_size", "replicas",
                                                      "replication_factor", "micro-batch-size", "num-replicas"))


def read(path: str | Path, config: Optional[str] = None, source: Optional[str] = None) -> Draft:
    """The draft of configuration ``config`` of ``path``; ``source`` is the file's public locator (default:
    the path as given)."""
    path = Path(path)
    if not path.is_file():
        raise refuse("FILE", str(path), "allowed: an existing configuration file")
    locator = source or str(path)
    if path.suffix == ".json":
        return _read_json(path, config, locator)
    data = load_yaml(path)
    available = names(path)
    if config is None:
        if len(available) != 1:
            raise refuse("CONFIG", None, f"allowed: one of {', '.join(available)} (FILE:CONFIG)")
        config = available[0]
    if config not in data or not isinstance(data[config], dict):
        raise refuse("CONFIG", config, f"allowed: {', '.join(available)}")
    entry = data[config]
    draft = Draft(source=f"{locator}#{config}", title="")
    if "cmd" in entry:
        return _read_benchmark(path, entry, config, draft)
    return _read_configs(entry, draft)


def _read_configs(entry: Dict[str, Any], draft: Draft) -> Draft:
    from ipuexp.importers import pytorch_cnns, pytorch_examples, tf1_cnns, tf2_cnns

    # Each application's own key names tell them apart.
    if "model_size" in entry or "gradient_accumulation_count" in entry:
        draft.title = tf1_cnns.TITLE
        return tf1_cnns.convert(entry, draft)
    if "model-name" in entry or "micro-batch-size" in entry:
        draft.title = tf2_cnns.TITLE
        return tf2_cnns.convert(entry, draft)
    if "norm_type" in entry or "half_partial" in entry or "data" in entry:
        draft.title = pytorch_cnns.TITLE
        return pytorch_cnns.convert(entry, draft)
    if "matmul_proportion" in entry or "layers_per_ipu" in entry:
        app = pytorch_examples.app_of_config(entry)
        draft.title = app.title
        return pytorch_examples.convert(entry, app, draft)
    key = next(iter(entry), "?")
    raise refuse(key, entry.get(key), "not a configuration of an application ipuexp imports (PyTorch BERT, ViT, "
                 "GPT-2 and CNNs; TensorFlow 1 and 2 CNNs)")


def _sibling_configs(path: Path) -> Optional[Dict[str, Any]]:
    """``configs.yml`` beside a ``benchmarks.yml`` (same prefix: ``train_benchmarks.yml`` -> ``train_configs.yml``)."""
    if not path.name.endswith("benchmarks.yml"):
        return None
    sibling = path.with_name(path.name[: -len("benchmarks.yml")] + "configs.yml")
    return load_yaml(sibling) if sibling.is_file() else None


def _read_benchmark(path: Path, entry: Dict[str, Any], config: str, draft: Draft) -> Draft:
    from ipuexp.importers import pytorch_examples, tf2_bert
    from ipuexp.importers.command_line import parse_command

    script, flags, poprun = parse_command(str(entry["cmd"]))
    configs = _sibling_configs(path)
    if script == "train.py" and configs is not None and "config" in flags:
        name = flags.pop("config")
        if name not in configs:
            raise refuse("config", name, "allowed: a configuration of the configs file beside this file")
        merged = {**configs[name], **flags}
        # The PyTorch CNN application under poprun takes its replicas from poprun; the TF1 application keeps its own
        # --replicas.
        pytorch = "model_size" not in merged
        if pytorch and "num_replicas" in poprun:
            merged["replicas"] = poprun["num_replicas"]
        draft = _read_configs(merged, draft)
        if pytorch and "num_instances" in poprun:
            draft.set("options.num_instances", as_int("num_instances", poprun["num_instances"]),
                      f"poprun --num-instances={poprun['num_instances']}")
        return draft
    if script in tf2_bert.SCRIPTS or script in tf2_bert.TASK_SCRIPTS:
        draft.title = tf2_bert.TITLE
        return tf2_bert.convert_benchmark(path, entry, flags, draft)
    app = pytorch_examples.APPS.get(pytorch_examples.SCRIPTS.get(script, ""))
    if app is None:
        raise refuse("cmd", script, "allowed: the scripts of the PyTorch ViT and GPT-2 examples, the TensorFlow 2 BERT "
                     "example (run_pretraining.py) and the TensorFlow 1 CNN application (train.py)")
    draft.title = app.title
    return pytorch_examples.convert_benchmark(entry, config, configs, draft)


def _read_json(path: Path, config: Optional[str], locator: str) -> Draft:
    from ipuexp.config import ipu_config as optimum
    from ipuexp.importers import popart_bert, tf1_bert, tf2_bert

    fields, warnings = optimum.read(path, key="FILE")
    if _is_optimum(fields):
        raise refuse("FILE", str(path), "an Optimum Graphcore ipu_config.json: import it with --base RECIPE, or run "
                     "it with model.hf.ipu_config=PATH")
    draft = Draft(source=locator, title="")
    # Each application's own keys tell the formats apart: TF2 nests its options in sections, PopART names its
    # precision popart_dtype and its vocabulary vocab_length, TF1 takes BERT's own names (seq_length, vocab_size).
    for module, marker in ((tf2_bert, "bert_config"), (popart_bert, "popart_dtype"), (popart_bert, "vocab_length"),
                           (tf1_bert, "seq_length")):
        if marker in fields:
            draft.title = module.TITLE
            return module.convert(fields, draft)
    key = next(iter(fields), "?")
    raise refuse(key, fields.get(key), "not a configuration ipuexp imports (PopART, TensorFlow 1 or TensorFlow 2 "
                 "BERT JSON; Optimum Graphcore ipu_config.json)")


def _is_optimum(fields: Dict[str, Any]) -> bool:
    return "gradient_accumulation_steps" in fields or ("ipus_per_replica" in fields and "task" not in fields)
