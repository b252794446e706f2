"""Packed sequences through the emulator: a sample is a pack, throughput in sequences/s, the per-sequence parts
and the mask construction cost a little more per pack."""
from __future__ import annotations

import pytest

from ipuexp.runner.evaluation import evaluate
from ipuexp.config.compose import load_experiment
from ipuexp.config.errors import ConfigError
from ipuexp.tracking.curated import metrics

BASE = ("+recipe=bert_base", "model.sequence_length=512", "model.mask_tokens=76", "data.micro_batch_size=2")


def _result(*overrides: str):
    return evaluate(load_experiment(*BASE, *overrides)).result


def test_a_pack_costs_about_a_row_and_counts_its_sequences() -> None:
    plain = _result()
    packed = _result("data.packing.max_sequences_per_pack=3", "data.packing.avg_sequences_per_pack=2")
    assert plain.throughput.sequences_per_s is None
    t = packed.throughput
    assert t.sequences_per_s == pytest.approx(2 * t.samples_per_s)
    # One pack runs the encoder on 512 tokens like one row, plus the mask built in every layer and the NSP head
    # per sequence slot: a little slower per row, not more.
    assert 0.9 * plain.throughput.samples_per_s < t.samples_per_s < plain.throughput.samples_per_s
    assert packed.model.flops_per_sample > plain.model.flops_per_sample
    assert metrics(packed)["throughput_sequences_per_s"] == t.sequences_per_s
    assert "throughput_sequences_per_s" not in metrics(plain)


@pytest.mark.parametrize("overrides,start", [
    (["data.packing.max_sequences_per_pack=0"], "data.packing.max_sequences_per_pack=0 is invalid"),
    (["data.packing.max_sequences_per_pack=2", "data.packing.avg_sequences_per_pack=2.5"],
     "data.packing.avg_sequences_per_pack=2.5 is invalid: allowed: a number from 1 to"),
    (["data.packing.avg_sequences_per_pack=0.5"], "data.packing.avg_sequences_per_pack=0.5 is invalid"),
])
def test_packing_values_are_checked(overrides, start) -> None:
    with pytest.raises(ConfigError) as err:
        load_experiment(*BASE, *overrides)
    assert str(err.value).startswith(start)


def test_packing_needs_the_zoo_bert() -> None:
    with pytest.raises(ConfigError, match=r"allowed: 1 for model.name=vit \(packed sequences are modelled for"):
        load_experiment("+recipe=vit_b16", "data.packing.max_sequences_per_pack=2")


def test_fp8_stash_halves_the_stash() -> None:
    """``options.stash_precision=float8`` (MLPerf v2.0's activation_checkpoint_dtype FLOAT8): the stashed
    checkpoints' float elements take one byte instead of the activations' two (integer tensors keep theirs);
    nothing else changes."""
    plain = _result()
    fp8 = _result("options.stash_precision=float8")
    for a, b in zip(plain.memory.ipus, fp8.memory.ipus):
        if a.breakdown.get("stash"):
            assert 0.5 * a.breakdown["stash"] <= b.breakdown["stash"] < 0.6 * a.breakdown["stash"]
            assert b.breakdown["optimizer_state"] == a.breakdown["optimizer_state"]
    with pytest.raises(ConfigError, match=r"options.stash_precision='float4' is invalid: allowed: half \| float8"):
        load_experiment(*BASE, "options.stash_precision=float4")
