"""Transformers models as ipuexp blocks: the shipped configurations, the split, real numerics against Transformers'
own forward, and the one-line errors. Needs the hf extra (skipped without Transformers); no network."""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from ipuexp.config.schema import HFModelConfig, ModelConfig  # noqa: E402
from ipuexp.models import build_model, zoo_layers  # noqa: E402
from ipuexp.models.hf_source import SHIPPED, SHIPPED_DIR, locate, resolve  # noqa: E402


def _cfg(config: str, task: str = "pretraining", **kw) -> ModelConfig:
    overrides = kw.pop("overrides", {})
    return ModelConfig(name="hf", hf=HFModelConfig(config=config, task=task, config_overrides=overrides), **kw)


def _meta(cfg: ModelConfig):
    with torch.device("meta"):
        return build_model(cfg)


# Published sizes (model cards and papers): BERT-Base 110M, RoBERTa-Large 355M, GPT-2 medium 355M and large 774M
# (with the released vocabulary), ViT-B/16 86.6M (1000-class head), TinyLlama 1.1B. Tolerance 2%.
@pytest.mark.parametrize("config, task, published, layers, first", [
    ("bert-base-uncased", "pretraining", 110.0e6, 12, "input_ids"),
    ("google-bert/bert-large-uncased", "pretraining", 336.2e6, 24, "input_ids"),
    ("roberta-large", "masked-lm", 355.0e6, 24, "input_ids"),
    ("gpt2-medium", "causal-lm", 355.0e6, 24, "input_ids"),
    ("openai-community/gpt2-large", "causal-lm", 774.0e6, 36, "input_ids"),
    ("vit-base-patch16-224", "classification", 86.6e6, 12, "pixel_values"),
    ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", "causal-lm", 1.1e9, 22, "input_ids"),
])
def test_shipped_configs_build_and_split(config, task, published, layers, first):
    model = _meta(_cfg(config, task))
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(published, rel=0.02)
    names = [b.name for b in model.blocks]
    assert names == ["embeddings", *(f"layer{i}" for i in range(layers)), "heads"]
    assert [b.is_layer for b in model.blocks].count(True) == layers == zoo_layers(_cfg(config, task))
    assert model.input_spec[0].name == first
    assert not any(p.device.type != "meta" for p in model.parameters())


def test_every_shipped_config_has_its_repository():
    assert sorted(p.stem for p in SHIPPED_DIR.glob("*.json")) == sorted(SHIPPED)
    for stem, repo in SHIPPED.items():
        assert locate(repo) == locate(stem) == SHIPPED_DIR / f"{stem}.json"


def test_a_local_folder_and_overrides(tmp_path):
    (tmp_path / "config.json").write_text((SHIPPED_DIR / "bert-base-uncased.json").read_text())
    src = resolve(_cfg(str(tmp_path), num_layers=3, overrides={"hidden_dropout_prob": 0.0}))
    assert src.label == tmp_path.name and src.config["num_hidden_layers"] == 3
    assert src.config["hidden_dropout_prob"] == 0.0
    assert _meta(_cfg(str(tmp_path / "config.json"), num_layers=3)).num_layers == 3


@pytest.mark.parametrize("cfg, message", [
    (_cfg("no-such/model"), "model.hf.config: 'no-such/model' is not a local file or folder"),
    (_cfg("bert-base-uncased", "translation"), "model.hf.task: 'translation' is not allowed; allowed: pretraining"),
    (_cfg("gpt2-medium", "masked-lm"), "allowed: causal-lm | classification | pretraining | question-answering | token-classification for gpt2-medium"),
    (_cfg("bert-base-uncased", sequence_length=513), "model.sequence_length: 513 is not allowed"),
    (_cfg("roberta-large", "masked-lm", sequence_length=513), "an integer in [1, 512] for roberta-large"),
])
def test_bad_configs_fail_on_one_line(cfg, message):
    with pytest.raises(ValueError) as err:
        _meta(cfg)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_an_unknown_model_type_is_named(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "no_such_type"}')
    with pytest.raises(ValueError) as err:
        _meta(_cfg(str(tmp_path / "config.json")))
    assert str(err.value).startswith(f"model.hf.config: {tmp_path.name!r}: its model_type 'no_such_type' is unknown "
                                     "to Transformers 5.23.0; allowed: a config.json whose model_type is one of its")
    assert "bert, roberta, gpt2" in str(err.value)


def test_an_unknown_model_type_is_one_line_naming_it(tmp_path):
    # Through the command line: the value, and what is allowed.
    import subprocess
    import sys

    (tmp_path / "config.json").write_text('{"model_type": "no_such_type"}')
    proc = subprocess.run([sys.executable, "-m", "ipuexp", "model=hf", f"model.hf.config={tmp_path}",
                           "tracking.enabled=false"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "model_type 'no_such_type' is unknown" in line and "allowed:" in line and "bert" in line


def test_a_backbone_without_a_layer_list_is_named():
    # A model the split cannot handle gets one line naming what it found.
    from ipuexp.models.hf import _layer_list

    backbone = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    with pytest.raises(ValueError) as err:
        _layer_list(backbone, "mine (Sequential)")
    assert str(err.value) == ("model.hf.config: mine (Sequential) cannot be split: Sequential holds no list of "
                              "repeated layers (found 0 (Linear), 1 (ReLU)); allowed: a model whose layers are a "
                              "ModuleList")


def _auto(task: str, vision: bool) -> str:
    if task == "classification":
        return "AutoModelForImageClassification" if vision else "AutoModelForSequenceClassification"
    return {"causal-lm": "AutoModelForCausalLM", "masked-lm": "AutoModelForMaskedLM"}[task]


SMALL = dict(overrides={"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "n_embd": 64,
                        "n_head": 4, "num_key_value_heads": 2, "vocab_size": 97, "image_size": 32},
             num_layers=2, sequence_length=12, image_size=32)


@pytest.mark.parametrize("config, task", [("bert-base-uncased", "classification"), ("roberta-large", "classification"),
                                          ("gpt2-medium", "causal-lm"), ("TinyLlama-1.1B-Chat-v1.0", "causal-lm"),
                                          ("vit-base-patch16-224", "classification")])
def test_blocks_compute_what_transformers_computes(config, task):
    """The chain of blocks on real (small) weights gives the logits of Transformers' own eager model, padding
    mask included: the probe hands each layer what the backbone's loop would."""
    cfg = _cfg(config, task, **SMALL)
    torch.manual_seed(0)
    ours = build_model(cfg).eval()
    src = resolve(cfg)
    reference = getattr(transformers, _auto(task, src.is_vision)).from_config(
        transformers.AutoConfig.for_model(**src.config), attn_implementation="eager", dtype=torch.float32).eval()
    reference.load_state_dict(ours.transformers_model.state_dict())
    inputs = list(ours.example_inputs(3, device="cpu"))
    names = [s.name for s in ours.input_spec]
    if "attention_mask" in names:
        inputs[names.index("attention_mask")] = torch.ones(3, 12, dtype=torch.int32)
        inputs[names.index("attention_mask")][:, -3:] = 0  # padded positions
    n = ours.labels_index()
    kwargs = {name: (t if t.is_floating_point() else t.long()) for name, t in zip(names[:n], inputs[:n])}
    with torch.no_grad():
        _, logits = ours(*inputs)
        expected = reference(**kwargs).logits
    if task == "classification" and not src.is_vision and "gpt" in config:
        expected = expected[:, -1]
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("config", ["bert-base-uncased", "roberta-large"])
def test_question_answering_head_gives_transformers_span_logits_and_loss(config):
    """task=question-answering: the span head on every position, loss the mean of start and end cross-entropies,
    as Transformers' *ForQuestionAnswering (SQuAD fine-tuning)."""
    cfg = _cfg(config, "question-answering", **SMALL)
    torch.manual_seed(0)
    ours = build_model(cfg).eval()
    assert [s.name for s in ours.input_spec][-2:] == ["start_positions", "end_positions"]
    src = resolve(cfg)
    reference = transformers.AutoModelForQuestionAnswering.from_config(
        transformers.AutoConfig.for_model(**src.config), attn_implementation="eager", dtype=torch.float32).eval()
    reference.load_state_dict(ours.transformers_model.state_dict())
    inputs = list(ours.example_inputs(3, device="cpu"))
    names = [s.name for s in ours.input_spec]
    kwargs = {name: (t if t.is_floating_point() else t.long()) for name, t in zip(names, inputs)}
    with torch.no_grad():
        loss, logits = ours(*inputs)
        expected = reference(**kwargs)
    torch.testing.assert_close(logits[..., 0], expected.start_logits, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(logits[..., 1], expected.end_logits, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(loss, expected.loss, rtol=1e-4, atol=1e-5)
