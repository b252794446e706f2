"""Optimum Graphcore ipu_config.json fields of the encoder-decoder and speech families: a speech model's flat layer
list, projection serialisation, the inference fields, null and 0 factors; and each family's example file applied
to its model at run time."""
from __future__ import annotations

from pathlib import Path

import pytest

from ipuexp.config import ipu_config as optimum
from ipuexp.config.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "optimum-graphcore"
WAV2VEC2 = {"num_feat_extract_layers": 7}


@pytest.mark.parametrize("lpi, expected", [
    ([9, 4, 4, 4], [1, 4, 4, 3]),     # wav2vec2-ctc-base-ipu: 7 convolutions, the positional one, 12 layers, 1 head
    ([6, 5, 5, 7], [0, 3, 5, 4]),     # wav2vec2-base-ipu (pre-training): 3 heads
    ([0, 4, 4, 4], [0, 4, 4, 4]),     # hubert-base-ipu (classification) counts the encoder layers alone
])
def test_a_speech_models_flat_layer_list_counts_its_encoder_layers(lpi, expected):
    values, _, _ = optimum.options({"layers_per_ipu": lpi}, "pod16", 12, None, model_config=WAV2VEC2)
    assert values["options.pipeline.layers_per_ipu"] == expected


def test_a_speech_list_that_counts_neither_way_is_one_line():
    with pytest.raises(ConfigError) as err:
        optimum.options({"layers_per_ipu": [9, 9, 9, 9]}, "pod16", 12, None, model_config=WAV2VEC2)
    assert "layers_per_ipu=[9, 9, 9, 9] is invalid" in str(err.value) and "\n" not in str(err.value)
    assert "7 convolutions" in str(err.value)


@pytest.mark.parametrize("fields, factor", [
    ({"projection_serialization_factor": 4}, 4),
    ({"embedding_serialization_factor": 5, "projection_serialization_factor": 4}, 5),
    ({"embedding_serialization_factor": 0}, 1),      # files written before IPUConfig required >= 1
    ({"embedding_serialization_factor": None}, 1),   # IPUConfig: null takes the default
])
def test_serialisation_factors(fields, factor):
    values, _, unmodelled = optimum.options(fields, "pod16", 12, None)
    assert values["options.embedding_serialization_factor"] == factor
    assert "projection_serialization_factor" not in unmodelled


def test_inference_takes_the_inference_fields():
    fields, _ = optimum.read(EXAMPLES / "mt5-small-ipu.json")
    train, _, unmodelled = optimum.options(fields, "pod16", 16, None)
    infer, notes, _ = optimum.options(fields, "pod16", 16, None, training=False)
    assert train["options.available_memory_proportion"] == 0.25 and infer["options.available_memory_proportion"] == 0.6
    assert train["options.gradient_accumulation"] == 128 and infer["options.gradient_accumulation"] == 1
    assert train["options.device_iterations"] == 10 and infer["options.device_iterations"] == 1
    assert train["options.pipeline.schedule"] == "grouped" and infer["options.pipeline.schedule"] == "sequential"
    assert "ShardedExecution" in notes["options.pipeline.schedule"]
    assert unmodelled == ["serialized_embedding_splits_per_ipu"]


def test_a_per_ipu_proportion_that_no_longer_matches_falls_back_for_inference():
    fields = {"layers_per_ipu": [0, 4, 4, 4], "matmul_proportion": [0.1, 0.2, 0.3, 0.4],
              "inference_layers_per_ipu": [6, 6]}
    values, _, _ = optimum.options(fields, "pod16", 12, None, training=False)
    assert values["options.pipeline.layers_per_ipu"] == [6, 6]
    assert values["options.available_memory_proportion"] == 0.2


@pytest.mark.parametrize("config, task, fields, ipu_config, layers", [
    ("t5-small", "seq2seq-lm", [], "t5-small-ipu.json", [0, 3, 4, 5]),
    ("bart-base", "seq2seq-lm", [], "bart-base-ipu.json", [0, 6, 3, 3]),
    ("mt5-small", "seq2seq-lm", [], "mt5-small-ipu.json", [0, 8, 8, 0]),
    ("whisper-tiny", "seq2seq-lm", ["model.sequence_length=3000"], "whisper-tiny-ipu.json", [4, 4]),
    ("hubert-base-ls960", "audio-classification", ["model.sequence_length=16000"], "hubert-base-ipu.json",
     [0, 4, 4, 4]),
    ("wav2vec2-base", "ctc", ["model.sequence_length=16000", "model.hf.target_length=32"],
     "wav2vec2-ctc-base-ipu.json", [1, 4, 4, 3]),
    ("distilbert-base-uncased", "question-answering", [], "distilbert-base-ipu.json", [2, 4]),
    ("convnext-base-224", "image-classification", [], "convnext-base-ipu.json", [9, 9, 9, 9]),
    ("mpnet-base", "masked-lm", [], "mpnet-base-ipu.json", [0, 4, 4, 4]),
])
def test_each_familys_example_file_applies_to_its_model(compose_config, config, task, fields, ipu_config, layers):
    cfg = compose_config(["model=hf", f"model.hf.config={config}", f"model.hf.task={task}", *fields,
                          f"model.hf.ipu_config={EXAMPLES / ipu_config}"])
    assert list(cfg.options.pipeline.layers_per_ipu) == layers
