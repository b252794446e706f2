"""Every configuration of Graphcore's published files either imports (a recipe that composes and validates) or is
refused on one line naming the key it cannot map; the count of each is pinned so a regression shows."""
from __future__ import annotations

import pytest

from ipuexp.config.errors import ConfigError
from ipuexp.importers import names, read
from ipuexp.importers.recipe import write
from ipuexp.config.user_recipes import ENV_VAR
from published import DATA, split_bundle

FILES = sorted((DATA / "graphcore-configs").glob("*/*"))


def _outcomes(folder):
    for path in (p for f in FILES for p in split_bundle(f, folder)):
        for name in names(path):
            try:
                yield path, name, write(read(path, None if path.suffix == ".json" else name), "t",
                                        overwrite=True)[1]
            except ConfigError as err:
                yield path, name, err


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv(ENV_VAR, str(tmp_path_factory.mktemp("recipes")))
    try:
        yield list(_outcomes(tmp_path_factory.mktemp("bundle")))
    finally:
        mp.undo()


@pytest.mark.slow
def test_every_configuration_imports_or_is_refused_in_one_line(outcomes):
    imported = [(p.name, n) for p, n, r in outcomes if not isinstance(r, ConfigError)]
    refused = [(p.name, n, r) for p, n, r in outcomes if isinstance(r, ConfigError)]
    for _, _, err in refused:
        assert "\n" not in str(err) and str(err).startswith(f"{err.key}=") and err.key
    assert len(imported) == 128 and len(refused) == 114
    keys = {}
    for _, _, err in refused:
        keys[err.key] = keys.get(err.key, 0) + 1
    assert keys == {"model": 52, "pipeline_splits": 16, "cmd": 10, "identical_replica_seeding": 8, "hidden_size": 5,
                    "parameters": 4, "options.gradient_accumulation": 4, "model_size": 4,
                    "options.device_iterations": 3, "config": 2, "options.available_memory_proportion": 2,
                    "model-name": 2, "norm-layer": 1, "global-batch-size": 1}


@pytest.mark.slow
def test_refusals_name_what_ipuexp_lacks(outcomes):
    by = {(p.name, n): r for p, n, r in outcomes}
    squad = by[("187775b_applications_pytorch_bert_configs.yml", "squad_large_384")]
    assert not isinstance(squad, ConfigError) and squad.model.hf.task == "question-answering"
    tiny = by[("HEAD_nlp_bert_pytorch_configs_pretraining.yml", "demo_tiny_128")]
    assert tiny.key == "hidden_size" and "768 12 (base), 1024 16 (large)" in str(tiny)
    xl = by[("HEAD_nlp_gpt2_pytorch_benchmarks.yml", "pytorch_gpt2_xlarge_infer_gen_pod16")]
    assert xl.key == "model" and xl.value == "gpt2-xl"
    packed = by[("v1.1_bert_popart_pod16-closed.json", "v1.1_bert_popart_pod16-closed")]
    assert not isinstance(packed, ConfigError) and packed.data.packing.max_sequences_per_pack == 3
    pt_packed = by[("187775b_applications_pytorch_bert_configs.yml", "pretrain_large_128_packed")]
    assert pt_packed.data.packing.avg_sequences_per_pack == 1.17  # configs_pretraining.yml packing_factor
    squad = by[("HEAD_nlp_bert_tensorflow2_benchmarks.yml", "tf2_bert_squad_large_train_real_pod16")]
    assert squad.key == "cmd" and "SQuAD span prediction head is not in the zoo" in str(squad)
    effnet = by[("HEAD_vision_cnns_pytorch_train_configs.yml", "efficientnet-b4-g16-gn-pod16")]
    assert effnet.key == "model" and effnet.value == "efficientnet-b4"
    cifar = by[("HEAD_vision_cnns_tensorflow2_configs.yml", "resnet8_test")]
    assert cifar.key == "model-name" and cifar.value == "cifar_resnet8"


@pytest.mark.slow
def test_imported_configurations_follow_their_file(outcomes):
    by = {(p.name, n): r for p, n, r in outcomes}
    large512 = by[("187775b_applications_pytorch_bert_configs.yml", "pretrain_large_512")]
    assert large512.model.sequence_length == 512 and large512.data.micro_batch_size == 2
    three = by[("HEAD_nlp_bert_pytorch_configs_pretraining.yml", "pretrain_base_3L_128_single")]
    assert three.model.size == "base" and three.model.num_layers == 3 and three.system.name == "pod4"
    gpt2_large = by[("HEAD_nlp_gpt2_pytorch_benchmarks.yml", "pytorch_gpt2_large_train_gen_pod16")]
    assert gpt2_large.model.size == "large" and len(gpt2_large.options.pipeline.layers_per_ipu) == 16
    r128 = by[("v1.1_resnet_tf1_configs.yml", "mk2_resnet50_mlperf_pod128_lars")]
    assert r128.system.name == "pod128" and r128.options.replication_factor == 128
    bn16 = by[("v1.1_resnet_tf1_configs.yml", "mk2_resnet50_bn_16ipus")]
    assert list(bn16.options.pipeline.layers_per_ipu) == [3, 4, 4, 5] and bn16.options.precision == "16.32"
    popart = by[("9b61ab6_applications_popart_bert_configs_mk2_pretrain_large_128.json",
                 "9b61ab6_applications_popart_bert_configs_mk2_pretrain_large_128")]
    assert popart.model.size == "large" and popart.options.gradient_accumulation == 65536 // (8 * 4)
    assert list(popart.options.pipeline.device_mapping) == [0, 1, 2, 3, 0] and popart.model.vocab_size == 30400
    tf2 = by[("pretrain_large_128_phase1_POD64.json", "pretrain_large_128_phase1_POD64")]
    assert tf2.options.replication_factor == 16 and tf2.options.embedding_serialization_factor == 5
    resnet = by[("HEAD_vision_cnns_pytorch_train_benchmarks.yml", "pytorch_resnet50_train_real_pod4")]
    assert resnet.model.name == "resnet50" and resnet.options.replication_factor == 4
    assert resnet.options.gradient_accumulation == 228 and resnet.options.num_instances == 2
    bs20 = by[("HEAD_vision_cnns_tensorflow2_configs.yml", "resnet50_mlperf_pod16_bs20")]
    assert list(bs20.options.pipeline.layers_per_ipu) == [1, 2, 1, 2, 2, 3, 5]
    assert bs20.options.gradient_accumulation == 1920 // (20 * 16) and bs20.options.pipeline.schedule == "sequential"
    assert bs20.training
    serving = by[("HEAD_vision_cnns_tensorflow2_configs.yml", "resnet50_infer_bs32")]
    assert not serving.training and serving.data.micro_batch_size == 32


def test_split_points_become_segments():
    from ipuexp.importers.tf1_cnns import split_counts

    assert split_counts(["b1/0/relu", "b1/2/relu", "b2/0/relu", "b2/2/relu", "b3/0/relu", "b3/3/relu"]) == \
        [1, 2, 1, 2, 2, 3, 5]
    with pytest.raises(ConfigError, match="pipeline_splits"):
        split_counts(["b5/0/relu"])


@pytest.mark.slow
def test_every_imported_configuration_runs(outcomes, tmp_path_factory):
    """Imports and runs: each imported configuration goes through the analytic engine and gives a throughput
    and a memory verdict for every IPU (out of memory is a result, not an error)."""
    from ipuexp.runner.evaluation import evaluate

    cache = str(tmp_path_factory.mktemp("captures"))
    ran = 0
    for path, name, exp in outcomes:
        if isinstance(exp, ConfigError):
            continue
        result = evaluate(exp, cache_dir=cache).result
        assert result.throughput.samples_per_s > 0, (path.name, name)
        assert len(result.memory.ipus) == len(set(result.memory.ipus and [i.ipu for i in result.memory.ipus]))
        ran += 1
    assert ran == 128


def test_invalid_yaml_is_one_line_with_line_and_column(tmp_path):
    import subprocess
    import sys

    (tmp_path / "broken.yml").write_text("a: [1, 2\nb: c: d\n")
    proc = subprocess.run([sys.executable, "-m", "ipuexp.recipes", "import", "broken.yml", "--name", "x"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "ipuexp.recipes: cannot import broken.yml: file='broken.yml' is invalid: allowed: valid YAML (invalid at "
        "line 2, column 2: expected ',' or ']', but got ':')"]
    assert not (tmp_path / "recipes").exists()


def test_an_existing_recipe_is_kept_unless_forced_and_names_stay_in_the_folder(tmp_path):
    import os
    import subprocess
    import sys

    spec = f"{DATA / 'graphcore-configs/examples/HEAD_vision_vit_pytorch_configs.yml'}:b16_in1k_pretrain"

    def imp(*args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, IPUEXP_RECIPE_DIR=str(tmp_path / "recipes"))
        return subprocess.run([sys.executable, "-m", "ipuexp.recipes", "import", spec, *args], capture_output=True,
                              text=True, cwd=tmp_path, timeout=300, env=env)

    assert imp("--name", "mine").returncode == 0
    path = tmp_path / "recipes" / "mine.yaml"
    path.write_text(path.read_text() + "# my edit\n")
    again = imp("--name", "mine")
    assert again.returncode == 2 and "--force" in again.stderr and "# my edit" in path.read_text()
    assert imp("--name", "mine", "--force").returncode == 0 and "# my edit" not in path.read_text()
    outside = imp("--name", "../escape")
    assert outside.returncode == 2 and not (tmp_path / "escape.yaml").exists()


@pytest.mark.parametrize("config, layers, hf_config", [("squad_base_384", [0, 4, 4, 4], "bert-base-uncased"),
                                                       ("squad_large_384", [2, 3, 3, 3, 3, 3, 3, 4],
                                                        "bert-large-uncased")])
def test_bert_squad_configurations_import_as_transformers_span_prediction(tmp_path, monkeypatch, config, layers,
                                                                          hf_config):
    from ipuexp.runner.evaluation import evaluate
    from ipuexp.config.compose import compose_recipe
    from ipuexp.importers import read
    from ipuexp.importers.recipe import write

    monkeypatch.setenv("IPUEXP_RECIPE_DIR", str(tmp_path))
    path = DATA / "graphcore-configs/examples/187775b_applications_pytorch_bert_configs.yml"
    draft = read(path, config, f"graphcore/examples@187775b:applications/pytorch/bert/configs.yml#{config}")
    write(draft, f"imported_{config}")
    exp = compose_recipe(f"imported_{config}")
    assert (exp.model.name, exp.model.hf.config, exp.model.hf.task) == ("hf", hf_config, "question-answering")
    assert list(exp.options.pipeline.layers_per_ipu) == layers and exp.options.pipeline.device_mapping is None
    assert exp.model.sequence_length == 384
    result = evaluate(exp).result
    assert result.memory.fits and result.throughput.samples_per_s > 0
