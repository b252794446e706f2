"""Every recipe composes, validates, and still equals the published configuration it mirrors.

The expected values are parsed from the published files in ``tests/data/graphcore-configs`` (and Graphcore's
PopTorch pipelining tutorial for the MNIST recipe) at test time, so a recipe that drifts from its source fails here.
"""
from __future__ import annotations

import csv
import json
import math
import re
import shlex
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import yaml

from ipuexp.calibration import GROUP, TABLE, load_rows, register_runs, run_names
from ipuexp.config.store import recipe_names
from ipuexp.config.checks import value_at
from ipuexp.config.validate import validate
from ipuexp.config.pipeline import ipus_per_replica
from published import shared_copy

RECIPES = recipe_names()
OPTIMIZERS = {"adamw": "adamw", "adam": "adam", "lamb": "lamb", "lambnobiascorrection": "lamb", "sgd": "sgd",
              "lars": "lars", "momentum": "sgd_momentum"}
# ResNet-50 bottleneck blocks per stage (He et al. 2016, table 1), for the TF1 pipeline_splits names.
RESNET50_BLOCKS = (3, 4, 6, 3)


def test_recipes_exist():
    expected = {"bert_large", "bert_large_sl384", "bert_base", "resnet50", "vit_b16", "gpt2_medium",
                "mnist_pipeline", "bert_large_pod64", "bert_large_sl384_pod64", "resnet50_pod64", "vit_b16_pod64",
                "gpt2_medium_pod64"}
    assert expected <= set(RECIPES)


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_composes_and_validates_cleanly(name, compose_config):
    cfg = compose_config([f"+recipe={name}"])
    assert cfg.recipe == name
    assert validate(cfg) == []


CALIBRATION_RUNS = run_names()
OPTIMUM_DATA = Path(__file__).resolve().parent.parent / "data" / "optimum"
# Calibration runs of Optimum Graphcore: their source is a Hugging Face model repository, checked against the
# ipu_config.json each trained with (tests/data/optimum) rather than a Graphcore example file.
OPTIMUM_RUNS = [n for n in CALIBRATION_RUNS if n.endswith("_optimum")]
PACKED_RUN = "bert_large_packed_mlperf11_mk2_pod16_popart"
# The same MLPerf v1.1 submission on three systems: each run against its own configuration file.
PACKED_RUNS = {PACKED_RUN: "pod16", "bert_large_packed_mlperf11_mk2_pod64_popart": "pod64",
               "bert_large_packed_mlperf11_mk2_pod128_popart": "pod128"}


def _compose(group: str, name: str, compose_config):
    if group == GROUP:
        register_runs()
    return compose_config([f"+{group}={name}"])


@pytest.mark.parametrize("name", OPTIMUM_RUNS)
def test_optimum_run_matches_its_ipu_config(name, compose_config):
    from ipuexp.config.ipu_config import options

    cfg = _compose(GROUP, name, compose_config)
    fields = json.loads((OPTIMUM_DATA / f"{name}.json").read_text())
    values, _notes, _unmodelled = options(fields, "pod16", None, value_at(cfg, "options.pipeline.device_mapping"))
    values.pop("options.pipeline.device_mapping", None)  # the heads' placement is the model class's, not the file's
    for key in ("options.inference_device_iterations", "options.executable_cache_dir"):  # not the training run's
        values.pop(key, None)
    mismatches = [f"{key}: run {value_at(cfg, key)!r} != ipu_config {value!r}" for key, value in values.items()
                  if not _same(value_at(cfg, key), value)]
    assert not mismatches, f"{name} drifted from its ipu_config.json: " + "; ".join(mismatches)
    assert value_at(cfg, "host.framework") == "optimum"


@pytest.mark.parametrize("group,name", [("recipe", n) for n in RECIPES] + [(GROUP, n) for n in CALIBRATION_RUNS
                                                                          if n not in OPTIMUM_RUNS + list(PACKED_RUNS)])
def test_recipe_matches_its_published_source(group, name, compose_config, data_dir):
    cfg = _compose(group, name, compose_config)
    source, config = shared_copy(str(cfg.source))
    assert source.is_file(), f"{name}: source {source} does not exist"
    expected, structure = published_values(source, config)
    assert expected, f"{name}: nothing parsed from {cfg.source}"
    mismatches = [f"{key}: recipe {value_at(cfg, key)!r} != published {value!r}"
                  for key, value in expected.items() if not _same(value_at(cfg, key), value)]
    assert not mismatches, f"{name} drifted from {cfg.source}: " + "; ".join(mismatches)
    lpi = value_at(cfg, "options.pipeline.layers_per_ipu")
    dm = value_at(cfg, "options.pipeline.device_mapping")
    for check, value in structure.items():
        if check == "ipus_per_replica":
            assert ipus_per_replica(lpi, dm) == value, f"{name}: IPUs per replica"
        elif check == "num_layers":
            assert sum(lpi) == value, f"{name}: layers"
        elif check == "split_after":
            bounds = [sum(lpi[: i + 1]) for i in range(len(lpi) - 1)]
            assert bounds == value, f"{name}: pipeline splits after layers {value}, recipe has {bounds}"
        elif check == "num_stages":
            assert len(lpi) == value, f"{name}: stages"


@pytest.mark.parametrize("name", sorted(PACKED_RUNS))
def test_packed_mlperf_run_matches_its_submission(name, compose_config, data_dir):
    """Each packed MLPerf BERT row's run against the submission's configuration for its system (the copy under
    tests/data), its attention and feed-forward halves placed as att_ffn_placement says."""
    import json

    cfg = _compose(GROUP, name, compose_config)
    system = PACKED_RUNS[name]
    sub = json.loads((data_dir / "graphcore-configs" / "mlperf" / f"v1.1_bert_popart_{system}-closed.json").read_text())
    assert value_at(cfg, "system.name") == system and value_at(cfg, "host.framework") == "popart"
    assert value_at(cfg, "options.tensor_locations.optimizer_state.on_chip") == (not sub["optimizer_state_offchip"])
    expected = {
        "data.micro_batch_size": sub["batch_size"], "options.gradient_accumulation": sub["gradient_accumulation_factor"],
        "options.replication_factor": sub["replication_factor"], "options.device_iterations": sub["batches_per_step"],
        "data.packing.max_sequences_per_pack": sub["max_sequences_per_pack"],
        "data.packing.avg_sequences_per_pack": sub["avg_seq_per_pack"], "model.mask_tokens": sub["mask_tokens"],
        "model.vocab_size": sub["vocab_length"], "model.sequence_length": sub["sequence_length"],
        "options.available_memory_proportion": sub["available_memory_proportion"],
        "options.embedding_serialization_factor": sub["embedding_serialization_vocab_steps"],
        "options.loss_scaling": sub["loss_scaling"], "optimizer.weight_decay": sub["weight_decay"],
        "options.stochastic_rounding": sub["stochastic_rounding"],
    }
    from ipuexp.models.bert import mask_tokens_for

    for key, value in expected.items():
        run = value_at(cfg, key)
        if key == "model.mask_tokens" and run is None:  # the zoo's count at this sequence length (the importer's)
            run = mask_tokens_for(int(value_at(cfg, "model.sequence_length")))
        assert _same(run, value), f"{key}: run {run!r} != submission {value!r}"
    lpi = list(value_at(cfg, "options.pipeline.layers_per_ipu"))
    ipus = list(value_at(cfg, "options.pipeline.device_mapping"))
    assert value_at(cfg, "options.pipeline.split_layers") and sum(lpi) == 2 * sub["num_layers"]
    # encoder_start_pipeline_stage 1: the embeddings alone on IPU 0; then each stage's halves as placed
    assert lpi[0] == 0 and list(zip(ipus, lpi))[1:] == [(i, a + f) for i, (a, f) in sub["att_ffn_placement"]]


def test_shipped_calibration_table_is_the_published_one(data_dir):
    """The package's copy carries the same rows and figures; only the file references are public locators."""
    with open(data_dir / "calibration" / "published-throughput.csv", newline="") as f:
        published = list(csv.DictReader(f))
    with open(TABLE, newline="") as f:
        shipped = list(csv.DictReader(f))
    assert len(shipped) == len(published) >= 8
    for mine, theirs in zip(shipped, published):
        for key in theirs:
            if key not in ("config_reference", "throughput_source"):
                assert mine[key] == theirs[key], f"{mine['id']}: {key}"


def test_calibration_runs_are_not_user_recipes():
    assert not set(RECIPES) & set(CALIBRATION_RUNS)
    assert not any(name.startswith("calib") for name in RECIPES)


def test_every_calibration_row_has_its_configuration(compose_config):
    with open(TABLE, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["id"] for r in rows] == [r.id for r in load_rows()]
    for row in rows:
        name = row["id"]
        assert name in CALIBRATION_RUNS, f"no configuration for calibration row {name}"
        cfg = _compose(GROUP, name, compose_config)
        lpi = value_at(cfg, "options.pipeline.layers_per_ipu")
        ipr = ipus_per_replica(lpi, value_at(cfg, "options.pipeline.device_mapping"))
        seq_or_image = "model.image_size" if cfg.model.name in ("resnet50", "vit") else "model.sequence_length"
        actual = {
            "ipu": cfg.ipu.name, "system": cfg.system.name, "precision": cfg.options.precision,
            "micro_batch": cfg.data.micro_batch_size, "replicas": cfg.options.replication_factor,
            "ipus_per_replica": ipr, "grad_accum": cfg.options.gradient_accumulation,
            "device_iterations": cfg.options.device_iterations, "seq_len_or_image": value_at(cfg, seq_or_image),
            "ipus": cfg.options.replication_factor * ipr,
            "global_batch": cfg.data.micro_batch_size * cfg.options.replication_factor
            * cfg.options.gradient_accumulation,
        }
        for key, value in actual.items():
            assert str(value) == row[key], f"{name}: {key} {value!r} != calibration row {row[key]!r}"
        assert row["config_reference"].startswith(str(cfg.source).partition("#")[0]), name
        assert str(cfg.recipe) == f"calib_{name}"


# ----------------------------------------------------------------------------------------------------------------
# Published-file readers: each returns ({schema key: value}, {structural check: value}).

def published_values(source: Path, config: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    name = source.name
    if name.endswith("_benchmarks.yml"):
        return _from_benchmark(source, config)
    if source.parent.name == "mlperf" and "resnet" in name:
        return _from_tf1_cnn(yaml.safe_load(source.read_text())[config])
    if name.endswith("configs_selected.json"):
        return _from_tf2_bert(_tf2_sections(source)[config])
    if name.endswith(".json"):
        return _from_tf1_bert(json.loads(source.read_text()))
    if name.endswith((".yml", ".yaml")):
        return _from_poptorch_app(yaml.safe_load(source.read_text())[config])
    if source.parent.name == "graphcore-tutorials":
        return _from_tutorial(source.read_text())
    raise AssertionError(f"no reader for {source}")


def _from_poptorch_app(conf: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Graphcore's PopTorch applications (BERT, ViT, GPT-2): configs.yml keys or command-line flags."""
    direct = {
        "micro_batch_size": "data.micro_batch_size", "batch_size": "data.micro_batch_size",
        "replication_factor": "options.replication_factor", "num_replicas": "options.replication_factor",
        "num_instances": "options.num_instances",
        "gradient_accumulation": "options.gradient_accumulation",
        "device_iterations": "options.device_iterations",
        "layers_per_ipu": "options.pipeline.layers_per_ipu",
        "matmul_proportion": "options.available_memory_proportion",
        "embedding_serialization_factor": "options.embedding_serialization_factor",
        "replicated_tensor_sharding": "options.tensor_locations.optimizer_state.replicated_tensor_sharding",
        "enable_rts": "options.tensor_locations.optimizer_state.replicated_tensor_sharding",
        "recompute_checkpoint_every_layer": "options.recomputation.checkpoint_every_layer",
        "sequence_length": "model.sequence_length", "max_len": "model.sequence_length",
        "vocab_size": "model.vocab_size", "num_labels": "model.num_classes",
        "loss_scaling": "options.loss_scaling", "auto_loss_scaling": "options.auto_loss_scaling",
        "learning_rate": "optimizer.learning_rate", "weight_decay": "optimizer.weight_decay",
        "momentum": "optimizer.momentum", "random_seed": "options.random_seed",
        "prefetch_depth": "options.io.prefetch_depth", "reduction_type": "options.reduction_type",
        "precision": "options.precision", "stochastic_rounding": "options.stochastic_rounding",
    }
    out: Dict[str, Any] = {}
    structure: Dict[str, Any] = {}
    for key, value in conf.items():
        if key in direct:
            out[direct[key]] = value
        elif key == "optimizer_state_offchip":
            out["options.tensor_locations.optimizer_state.on_chip"] = not value
        elif key in ("enable_half_partials", "half_partials"):
            out["options.partials_type"] = "half" if value else "float"
        elif key == "enable_half_first_order_momentum":
            out["optimizer.state_precision"] = "half" if value else "float"
        elif key == "first_order_type":
            out["optimizer.state_precision"] = {"fp32": "float", "fp16": "half"}[value]
        elif key == "byteio":
            out["data.io_precision"] = "int8" if value else "auto"
        elif key == "optimizer":
            name = OPTIMIZERS[str(value).lower()]
            # PopTorch's SGD with a non-zero momentum keeps a velocity per weight (poptorch.optim.SGD).
            out["optimizer.name"] = "sgd_momentum" if name == "sgd" and conf.get("momentum") else name
        elif key == "model":  # GPT-2 --model gpt2-medium
            family, _, size = str(value).partition("-")
            out["model.name"], out["model.size"] = family, size or "small"
        elif key == "num_hidden_layers":
            structure["num_layers"] = value
        elif key == "ipus_per_replica":
            structure["ipus_per_replica"] = value
    return out, structure


def _from_benchmark(source: Path, name: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """A benchmarks.yml entry: poprun flags, then the script's flags over its --config entry (if any)."""
    cmd = shlex.split(yaml.safe_load(source.read_text())[name]["cmd"])
    script = next(i for i, tok in enumerate(cmd) if tok.endswith(".py"))
    launcher, args = _flags(cmd[:script]), _flags(cmd[script + 1:])
    conf: Dict[str, Any] = {}
    if "config" in args:
        configs = source.with_name(source.name.replace("_benchmarks.yml", "_configs.yml"))
        conf.update(yaml.safe_load(configs.read_text())[args.pop("config")])
    conf.update(args)
    conf.update({k: v for k, v in launcher.items() if k in ("num_replicas", "num_instances", "ipus_per_replica")})
    return _from_poptorch_app(conf)


def _flags(tokens: List[str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    key = None
    for tok in tokens:
        if tok.startswith("--"):
            key, _, value = tok[2:].partition("=")
            key = key.replace("-", "_")
            out[key] = [] if not value else [value]
        elif key is not None:
            out[key].append(tok)
    return {k: _scalar_or_list(v) for k, v in out.items()}


def _scalar_or_list(values: List[str]) -> Any:
    """A flag's value: True for a bare flag, the parsed token for one value, a list for several (nargs='+')."""
    parsed = [yaml.safe_load(v) for v in values]
    if not parsed:
        return True
    return parsed[0] if len(parsed) == 1 else parsed


def _from_tf1_bert(conf: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Graphcore's TensorFlow 1 BERT application (applications/tensorflow/bert/configs/*.json)."""
    layers = _stage_layers(conf["pipeline_stages"])
    out = {
        "data.micro_batch_size": conf["micro_batch_size"],
        "options.replication_factor": conf["replicas"],
        "options.gradient_accumulation": conf["gradient_accumulation_count"],
        "options.device_iterations": conf["batches_per_step"],
        "options.available_memory_proportion": conf["available_memory_proportion"],
        "options.partials_type": conf["partials_type"],
        "options.precision": {"16": "16.16", "32": "32.32"}[str(conf["precision"])],
        "options.stochastic_rounding": conf["stochastic_rounding"],
        "options.recomputation.mode": "pipeline" if conf["enable_recomputation"] else "none",
        "options.tensor_locations.optimizer_state.on_chip": not conf["variable_offloading"],
        "options.tensor_locations.optimizer_state.replicated_tensor_sharding": conf["replicated_tensor_sharding"],
        "options.pipeline.schedule": conf["pipeline_schedule"].lower(),
        "options.pipeline.layers_per_ipu": layers,
        "options.pipeline.device_mapping": conf["device_mapping"],
        "options.reduction_type": conf["reduction_type"],
        "options.loss_scaling": conf["loss_scaling"],
        "options.embedding_serialization_factor": conf["matmul_serialize_factor"],
        "options.random_seed": conf["seed"],
        "model.sequence_length": conf["seq_length"],
        "model.vocab_size": conf["vocab_size"],
        "optimizer.name": OPTIMIZERS[conf["optimizer"].lower()],
        "optimizer.learning_rate": conf["base_learning_rate"],
        "optimizer.weight_decay": conf["weight_decay_rate"],
    }
    return out, {"num_layers": conf["num_hidden_layers"]}


def _tf2_sections(source: Path) -> Dict[str, Dict[str, Any]]:
    """The TF2 'selected' file: ``### <path>`` headers, each followed by one JSON document."""
    parts = re.split(r"^### (\S+)\s*$", source.read_text(), flags=re.M)
    return {parts[i]: json.loads(parts[i + 1]) for i in range(1, len(parts), 2)}


def _from_tf2_bert(conf: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Graphcore's TensorFlow 2 BERT application (nlp/bert/tensorflow2/configs/*.json)."""
    ipu, batch, opt = conf["ipu_config"], conf["global_batch"], conf["optimizer_opts"]
    out = {
        "data.micro_batch_size": batch["micro_batch_size"],
        "options.replication_factor": batch["replicas"],
        "options.gradient_accumulation": batch["grad_acc_steps_per_replica"],
        "options.pipeline.layers_per_ipu": _stage_layers(ipu["pipeline_stages"]),
        "options.pipeline.device_mapping": ipu["pipeline_device_mapping"],
        "options.available_memory_proportion": ipu["matmul_available_memory_proportion_per_pipeline_stage"],
        "options.tensor_locations.optimizer_state.replicated_tensor_sharding": ipu["replicated_tensor_sharding"],
        "options.loss_scaling": opt["loss_scaling"],
        "options.embedding_serialization_factor": conf.get("embedding_serialization_factor", 1),
        "options.random_seed": conf["seed"],
        "model.sequence_length": conf["max_seq_length"],
        "model.vocab_size": conf["bert_config"]["vocab_size"],
        "optimizer.name": OPTIMIZERS[opt["name"].lower()],
        "optimizer.learning_rate": opt["learning_rate"]["max_learning_rate"],
        "optimizer.weight_decay": opt["weight_decay_rate"],
    }
    return out, {"num_layers": conf["bert_config"]["num_hidden_layers"]}


def _stage_layers(stages: List[List[str]]) -> List[int]:
    """Encoder layers ("hid") per pipeline stage; a trailing stage without any is the separate head stage."""
    counts = [sum(1 for block in stage if block == "hid") for stage in stages]
    return counts[:-1] if len(counts) > 1 and counts[-1] == 0 else counts


def _from_tf1_cnn(conf: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Graphcore's TensorFlow 1 CNN application as used for MLPerf (mlperf/*_resnet_tf1_configs.yml)."""
    out = {
        "data.micro_batch_size": conf.get("micro_batch_size", conf.get("batch_size")),
        "options.replication_factor": conf["replicas"],
        "options.gradient_accumulation": conf["gradient_accumulation_count"],
        "options.available_memory_proportion": [float(v) for v in conf["available_memory_proportion"]],
        "options.partials_type": "half" if conf["enable_half_partials"] else "float",
        "options.recomputation.mode": "pipeline" if conf["enable_recomputation"] else "none",
        "options.tensor_locations.optimizer_state.on_chip": bool(conf["disable_variable_offloading"]),
        "options.pipeline.schedule": conf["pipeline_schedule"].lower(),
        "options.loss_scaling": conf["loss_scaling"],
        "data.io_precision": "int8" if conf["eight_bit_io"] else "auto",
        "model.size": str(conf["model_size"]),
        "optimizer.name": OPTIMIZERS[conf["optimiser"].lower()],
        "optimizer.momentum": conf["momentum"],
        "optimizer.learning_rate": conf["abs_learning_rate"],
        "optimizer.weight_decay": conf["weight_decay"],
    }
    structure = {"ipus_per_replica": conf["shards"], "split_after": [_split_layer(s) for s in conf["pipeline_splits"]]}
    return out, structure


def _split_layer(name: str) -> int:
    """Bottleneck blocks before a TF1 split point: 'b2/0/relu' (0-based unit) or 'stage2/unit1/relu' (1-based)."""
    m = re.match(r"b(\d)/(\d+)/relu$", name)
    if m:
        stage, unit = int(m.group(1)), int(m.group(2)) + 1
    else:
        m = re.match(r"stage(\d)/unit(\d+)/relu$", name)
        assert m, name
        stage, unit = int(m.group(1)), int(m.group(2))
    return sum(RESNET50_BLOCKS[: stage - 1]) + unit


def _from_tutorial(text: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The PopTorch pipelining tutorial (seed 002): its hyperparameter assignments and stage layout."""
    def number(var: str) -> float:
        return yaml.safe_load(re.search(rf"^{var} = (\S+)$", text, re.M).group(1))

    # Not compared: engine.epochs. The tutorial's 3 epochs are of MNIST's 60,000 training images; the recipe trains
    # on the 8,000-image split of the shared test set, so it runs more epochs for a comparable number of samples.
    out = {
        "optimizer.learning_rate": number("learning_rate"),
        "data.test_micro_batch_size": number("test_batch_size"),
        "options.inference_device_iterations": number("inference_iterations"),
        "data.micro_batch_size": number("batch_size"),
        "options.device_iterations": number("training_iterations"),
        "options.gradient_accumulation": number("gradient_accumulation"),
        "optimizer.name": OPTIMIZERS[re.search(r"poptorch\.optim\.(\w+)\(", text).group(1).lower()],
    }
    stages = int(re.search(r"we set (\d+) stages with poptorch\.PipelinedExecution", text).group(1))
    return out, {"num_stages": stages, "ipus_per_replica": stages}


def _same(actual: Any, expected: Any) -> bool:
    if isinstance(expected, list) or isinstance(actual, list):
        return (isinstance(actual, list) and isinstance(expected, list) and len(actual) == len(expected)
                and all(_same(a, e) for a, e in zip(actual, expected)))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return actual is expected
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return math.isclose(actual, expected, rel_tol=1e-9)
    return str(actual) == str(expected)
