"""A Transformers T5 annotated as Optimum Graphcore's PipelinedT5ForConditionalGeneration annotates it (one shared
embedding lookup on IPU 0, BeginBlock per encoder layer then per decoder layer, the LM head last), against ipuexp's
own split of the same model (``model=hf``, ``model.hf.task=seq2seq-lm``) on the same IPUs: the same parameters and
FLOPs on each IPU, and the same prediction within a few percent (the script's attention builds Transformers' own
[B, 1, S, S] masks where ipuexp's keeps them broadcastable, a few ops per layer)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.poptorch.helpers import SCRIPTS, run_script

pytest.importorskip("transformers")


def _ipuexp_prediction(job, tmp_path: Path, layers_per_ipu, encoder_layers):
    import transformers
    from omegaconf import OmegaConf

    from ipuexp.config.compose import compose_config
    from ipuexp.config.validate import validate
    from ipuexp.runner.evaluation import evaluate

    transformers.T5Config(vocab_size=1024, d_model=128, d_kv=32, d_ff=512, num_heads=4, num_layers=encoder_layers,
                          num_decoder_layers=sum(layers_per_ipu) - encoder_layers).to_json_file(tmp_path / "config.json")
    cfg = compose_config(["model=hf", f"model.hf.config={tmp_path / 'config.json'}", "model.hf.task=seq2seq-lm",
                          "model.sequence_length=64", "model.hf.target_length=32", "tracking.enabled=false"])
    for key in ("options", "optimizer", "data", "training"):
        cfg[key] = job.cfg[key]
    cfg.options.pipeline.layers_per_ipu = list(layers_per_ipu)  # encoder then decoder layers, as Optimum counts
    validate(cfg)
    return evaluate(OmegaConf.to_object(cfg)).result


def _per_ipu(result, field):
    return [getattr(ipu, field) for ipu in result.model.ipus]


@pytest.mark.parametrize("layers_per_ipu, encoder_layers", [([0, 2, 2, 2], 3), ([0, 3, 2, 1], 3)])
def test_t5_split_and_prediction(tmp_path, layers_per_ipu, encoder_layers):
    job = run_script(SCRIPTS / "t5_pipelined.py", ["--layers-per-ipu", *map(str, layers_per_ipu),
                                                   "--encoder-layers", str(encoder_layers)],
                     ["tracking.enabled=false"], tmp_path, predict_only=True)
    names = [b.name for b in job.graph.blocks]
    decoder_layers = sum(layers_per_ipu) - encoder_layers
    assert names == ["Embedding", *[f"Encoder{i}" for i in range(encoder_layers)],
                     *[f"Decoder{i}" for i in range(decoder_layers)], "LM Head Output"]
    ours = job.result
    theirs = _ipuexp_prediction(job, tmp_path, layers_per_ipu, encoder_layers)
    assert _per_ipu(ours, "parameters") == _per_ipu(theirs, "parameters")
    for field in ("fwd_flops", "bwd_flops"):
        for a, b in zip(_per_ipu(ours, field), _per_ipu(theirs, field), strict=True):
            assert a == pytest.approx(b, rel=0.01, abs=1e6), field
    assert ours.throughput.samples_per_s == pytest.approx(theirs.throughput.samples_per_s, rel=0.1)
