"""The README's bring-your-own-model example runs through the whole analytic engine."""
from __future__ import annotations

from ipuexp.runner.evaluation import evaluate
from ipuexp.config.compose import load_experiment


def test_custom_model_example(tmp_path):
    exp = load_experiment("model.name=custom", "model.target=examples.mlp_classifier:build",
                          "data.micro_batch_size=32", "options.gradient_accumulation=16",
                          "options.pipeline.layers_per_ipu=[2,2]", "system=pod4")
    result = evaluate(exp, cache_dir=str(tmp_path)).result
    # stem 784x512 + 4 layers (LayerNorm, 512->2048, 2048->512) + head 512x10, weights and biases
    width = 512
    layer = 2 * width + (width * 4 * width + 4 * width) + (4 * width * width + width)
    expected = (784 * width + width) + 4 * layer + (width * 10 + 10)
    assert result.model.parameters == expected
    assert [ipu.ipu for ipu in result.model.ipus] == [0, 1]
    assert result.fits and result.throughput.samples_per_s > 0


def test_groupbert_example_splits_and_runs(tmp_path):
    import torch

    from examples.groupbert import build

    exp = load_experiment("model.name=custom", "model.target=examples.groupbert:build", "data.micro_batch_size=4",
                          "options.gradient_accumulation=256", "options.pipeline.layers_per_ipu=[0,4,4,4]",
                          "options.replication_factor=4")
    result = evaluate(exp, cache_dir=str(tmp_path)).result
    with torch.device("meta"):
        model = build()
    assert result.model.parameters == sum(p.numel() for p in model.parameters())
    assert [ipu.ipu for ipu in result.model.ipus] == [0, 1, 2, 3] and model.num_layers == 12
    assert result.throughput.samples_per_s > 0
