"""Optimum Graphcore's model families beyond BERT-like encoders, split from the model tree: encoder-decoders (T5,
mT5, BART, Whisper), speech (Wav2Vec2, HuBERT), DistilBERT and ConvNeXt. For each: the blocks and what travels
between them, the parameter count against the published size, and the captured FLOPs against
``torch.utils.flop_counter`` on the same Transformers model's own forward and backward."""
from __future__ import annotations

import math

import pytest
import torch

transformers = pytest.importorskip("transformers")

from ipuexp.config.schema import HFModelConfig, ModelConfig  # noqa: E402
from ipuexp.graph.capture import capture_model  # noqa: E402
from ipuexp.models import build_model, zoo_layers  # noqa: E402

MB = 2


def _cfg(config: str, task: str, **kw) -> ModelConfig:
    target = kw.pop("target_length", 128)
    return ModelConfig(name="hf", hf=HFModelConfig(config=config, task=task, target_length=target), **kw)


# config, task, ModelConfig fields, published parameters (model cards; Transformers' defaults where the card
# gives none), encoder layers, decoder layers (0: one stack), stage entries between layers
FAMILIES = {
    "t5": ("t5-small", "seq2seq-lm", {}, 60.5e6, 6, 6, []),
    # Transformers 5.23 ties mT5's LM head to its embedding (MT5Config forces tie_word_embeddings): 172M, where the
    # released checkpoint's own head makes 300M
    "mt5": ("mt5-small", "seq2seq-lm", {}, 172.1e6, 8, 8, []),
    "bart": ("bart-base", "seq2seq-lm", {}, 139.4e6, 6, 6, []),
    "whisper": ("whisper-tiny", "seq2seq-lm", {"sequence_length": 3000, "target_length": 64}, 37.8e6, 4, 4, []),
    "wav2vec2": ("wav2vec2-base", "ctc", {"sequence_length": 16000, "target_length": 32}, 94.4e6, 12, 0, []),
    "hubert": ("hubert-base-ls960", "audio-classification", {"sequence_length": 16000}, 94.6e6, 12, 0, []),
    "distilbert": ("distilbert-base-uncased", "masked-lm", {}, 66.99e6, 6, 0, []),
    "distilbert-tokens": ("distilbert-base-uncased", "token-classification", {}, 66.4e6, 6, 0, []),
    "convnext": ("convnext-base-224", "image-classification", {}, 88.6e6, 36, 0, ["stage1", "stage2", "stage3"]),
    # LXMERT: 9 language layers, then 5 vision layers, then 5 cross-modality layers; 9,500 GQA/VQA answers
    "lxmert": ("lxmert-base-uncased", "question-answering", {}, 223.7e6, 19, 0, ["r_layers", "x_layers"]),
}


def _meta(cfg: ModelConfig):
    with torch.device("meta"):
        return build_model(cfg)


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request):
    config, task, fields, published, enc, dec, stages = FAMILIES[request.param]
    cfg = _cfg(config, task, **fields)
    graph = capture_model(lambda: build_model(cfg), MB)
    return request.param, cfg, graph, published, enc, dec, stages


def test_the_split_blocks_and_layers(family):
    name, cfg, graph, _published, enc, dec, stages = family
    names = [b.name for b in graph.blocks]
    layers = [b.name for b in graph.blocks if b.is_layer]
    assert names[0] == "embeddings" and names[-1] == "heads"
    assert layers == [f"layer{i}" for i in range(enc + dec)] == [n for n in names if n.startswith("layer")]
    assert zoo_layers(cfg) == enc + dec
    entries = [n for n in names if not n.startswith("layer") and n not in ("embeddings", "heads")]
    assert entries == (["decoder"] if dec else stages)
    if dec:  # the decoder's entry sits right after the last encoder layer
        assert names.index("decoder") == names.index(f"layer{enc - 1}") + 1


def test_the_parameters_match_the_published_size(family):
    name, cfg, graph, published, *_ = family
    model = _meta(cfg)
    total = sum(p.numel() for p in model.transformers_model.parameters())
    assert sum(b.parameters for b in graph.blocks) == total
    assert total == pytest.approx(published, rel=0.01)


def test_every_decoder_layer_receives_the_encoder_output(family):
    name, cfg, graph, _p, enc, dec, _s = family
    if not dec:
        pytest.skip("one stack")
    decoder_layers = [b for b in graph.blocks if b.is_layer][enc:]
    entry = next(b for b in graph.blocks if b.name == "decoder")
    encoder_out = entry.inputs[0].shape  # the last encoder layer's hidden states [B, S, d]
    for block in [entry, *decoder_layers]:
        assert any(t.shape == encoder_out and t.dtype.startswith("float") for t in block.outputs), block.name
    # the decoder runs on model.hf.target_length tokens
    assert decoder_layers[0].inputs[0].shape[1] == cfg.hf.target_length


def test_t5_hands_its_relative_position_bias_on():
    graph = capture_model(lambda: build_model(_cfg("t5-small", "seq2seq-lm")), MB)
    layers = [b for b in graph.blocks if b.is_layer]
    heads, seq = 8, 128
    bias = [heads, seq, seq]
    # layer 0 computes the bias, every later encoder layer receives it
    assert not any(t.shape[-3:] == bias for t in layers[0].inputs)
    assert all(any(t.shape[-3:] == bias for t in b.inputs) for b in layers[1:6])
    # only the first layer of each stack holds the bias table
    assert layers[0].parameters > layers[1].parameters


def test_lxmert_carries_both_streams_to_its_cross_modality_layers():
    graph = capture_model(lambda: build_model(_cfg("lxmert-base-uncased", "question-answering")), MB)
    names = [b.name for b in graph.blocks]
    cross = graph.blocks[names.index("x_layers") + 1]
    shapes = [t.shape for t in cross.inputs]
    assert [MB, 128, 768] in shapes and [MB, 36, 768] in shapes  # the language and the vision stream
    # the region features and boxes travel with the chain for the replays of the encoder's forward
    assert [MB, 36, 2048] in shapes and [MB, 36, 4] in shapes


def _conv_backward(grad_out_shape, x_shape, w_shape, *args, out_shape=None, **kwargs) -> int:
    """torch's formula for a convolution's backward, but for a grouped convolution (Wav2Vec2's positional one,
    ConvNeXt's depthwise ones), whose input gradient torch counts as if ungrouped: one product per gradient."""
    from torch.utils.flop_counter import conv_backward_flop

    groups, output_mask = args[6], args[7]
    if groups == 1:
        return conv_backward_flop(grad_out_shape, x_shape, w_shape, *args, out_val=out_shape, **kwargs)
    positions = math.prod(grad_out_shape[2:])
    one = 2 * x_shape[0] * positions * math.prod(w_shape[1:]) * w_shape[0]
    return one * sum(1 for computed in list(output_mask)[:2] if computed)


def _reference_flops(cfg: ModelConfig) -> int:
    """FLOPs of the Transformers model's own forward (with labels) and backward, on meta tensors."""
    from torch.utils.flop_counter import FlopCounterMode

    from ipuexp.models.hf_task import ctc_loss

    with torch.device("meta"):
        pipelined = build_model(cfg)
        model = pipelined.transformers_model
        inputs = pipelined.example_inputs(MB)
    specs = pipelined.input_spec
    named = {s.name: t for s, t in zip(specs, inputs)}
    labels = {s.name: named.pop(s.name) for s in specs if s.is_label}
    if cfg.hf.task == "masked-lm":  # Transformers' head takes a label per position
        with torch.device("meta"):
            labels["labels"] = torch.zeros((MB, cfg.sequence_length), dtype=torch.int64)
    from ipuexp.models.hf_chain import one_sequence_per_sample

    counter = FlopCounterMode(display=False, custom_mapping={torch.ops.aten.convolution_backward: _conv_backward})
    with counter, one_sequence_per_sample():
        if cfg.hf.task == "ctc":
            out = model(**named, return_dict=True)
            loss = ctc_loss(model.config, out.logits, labels["labels"])
        else:
            loss = model(**named, **labels, use_cache=False, return_dict=True).loss
        loss.backward()
    return counter.get_total_flops()


def test_the_flops_match_torchs_flop_counter_on_the_same_model(family):
    name, cfg, graph, *_ = family
    captured = sum(b.fwd_flops + b.bwd_flops for b in graph.blocks)
    if name == "distilbert":
        # the masked-LM head runs on the masked positions only (model.mask_tokens, 20 of 128 by default), where
        # Transformers' own forward projects every position onto the vocabulary
        head = next(b for b in graph.blocks if b.name == "heads")
        d, vocab, mask, seq = 768, 30522, head_positions(graph), 128
        per_token = (d * d + d * vocab) * 2 * 3 * MB  # vocab_transform and vocab_projector, forward and backward
        captured += per_token * (seq - mask)
    # LXMERT: the capture differentiates every output a block hands on, and the last cross-modality layer's vision
    # output feeds no loss of the QA head, whose backward Transformers' own step prunes (3.9 of 208 GFLOPs)
    rel = 0.02 if name == "lxmert" else 0.01
    assert captured == pytest.approx(_reference_flops(cfg), rel=rel)


def head_positions(graph) -> int:
    return int(graph.meta["mask_tokens"])


@pytest.mark.parametrize("config, task, fields, message", [
    ("mt5-small", "pretraining", {}, "model.hf.task: 'pretraining' is not allowed; allowed: classification | "
                                     "question-answering | seq2seq-lm | token-classification for mt5-small"),
    ("hubert-base-ls960", "causal-lm", {"sequence_length": 16000}, "allowed: audio-classification | "
                                                                     "classification | ctc for hubert-base-ls960"),
    ("whisper-tiny", "seq2seq-lm", {"sequence_length": 128}, "model.sequence_length: 128 is not allowed; allowed: "
                                                               "3000 for whisper-tiny"),
    ("whisper-tiny", "seq2seq-lm", {"sequence_length": 3000, "target_length": 500},
     "model.hf.target_length: 500 is not allowed; allowed: 1 to 448"),
    ("wav2vec2-base", "ctc", {"sequence_length": 16000, "target_length": 80},
     "model.hf.target_length: 80 is not allowed; allowed: 1 to 49, the frames"),
    ("wav2vec2-base", "ctc", {"sequence_length": 100}, "model.sequence_length: 100 is not allowed"),
])
def test_what_a_family_cannot_do_is_one_line(config, task, fields, message):
    with pytest.raises(ValueError) as err:
        _meta(_cfg(config, task, **fields))
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.parametrize("training", [True, False])
def test_every_family_predicts_training_and_inference(name, training, tmp_path):
    from ipuexp.config.compose import load_experiment
    from ipuexp.runner.evaluation import evaluate

    config, task, fields, _published, enc, dec, _stages = FAMILIES[name]
    overrides = [f"model.{k}={v}" if k != "target_length" else f"model.hf.target_length={v}"
                 for k, v in fields.items()]
    layers = enc + dec
    split = [layers // 4 + (1 if i < layers % 4 else 0) for i in range(4)]
    exp = load_experiment("model=hf", f"model.hf.config={config}", f"model.hf.task={task}", *overrides,
                          f"options.pipeline.layers_per_ipu=[{','.join(map(str, split))}]",
                          "options.gradient_accumulation=16", "options.device_iterations=4",
                          f"training={str(training).lower()}")
    result = evaluate(exp, cache_dir=str(tmp_path)).result
    assert result.throughput.samples_per_s > 0 and len(result.memory.ipus) == 4
    # inference keeps no gradients and no optimizer state; training keeps both
    for ipu in result.memory.ipus:
        kept = ipu.breakdown["gradient_accumulators"] + ipu.breakdown["optimizer_state"]
        assert (kept > 0) == (training and ipu.breakdown["weights"] > 0), ipu
