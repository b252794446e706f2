"""Graphcore's MLPerf Training BERT submissions (v1.0 to v2.0, POD4 to POD256, PopART): every configuration imports
as it ran (packed sequences, attention and feed-forward halves placed as att_ffn_placement says) and fits in
memory at its published size."""
from __future__ import annotations

import json
import re

import pytest

from ipuexp.runner.evaluation import evaluate
from ipuexp.config.user_recipes import ENV_VAR
from ipuexp.importers import read
from ipuexp.importers.recipe import write
from ipuexp.models.bert import mask_tokens_for
from published import DATA

SUBMISSIONS = sorted((DATA / "graphcore-configs" / "mlperf").glob("*_bert_popart_*.json"))
IPUS = {"pod4": 4, "pod16": 16, "pod64": 64, "pod128": 128, "pod256": 256}


@pytest.mark.slow
@pytest.mark.parametrize("path", SUBMISSIONS, ids=[p.stem for p in SUBMISSIONS])
def test_mlperf_bert_imports_and_fits(path, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    sub = json.loads(path.read_text())
    _, exp = write(read(path), re.sub(r"\W", "_", path.stem), overwrite=True)
    assert exp.data.packing.max_sequences_per_pack == sub["max_sequences_per_pack"]
    assert exp.data.micro_batch_size == sub["batch_size"]
    assert (exp.model.mask_tokens or mask_tokens_for(exp.model.sequence_length)) == sub["mask_tokens"]
    lpi, ipus = list(exp.options.pipeline.layers_per_ipu), list(exp.options.pipeline.device_mapping)
    if "att_ffn_placement" in sub:
        assert exp.options.pipeline.split_layers and sum(lpi) == 2 * sub["num_layers"]
        assert [(i, n) for i, n in zip(ipus, lpi) if n] == [(i, a + f) for i, (a, f) in sub["att_ffn_placement"]]
    else:
        assert not exp.options.pipeline.split_layers and sum(lpi) == sub["num_layers"]
    size = next(k for k in IPUS if f"_{k}" in path.stem)
    assert exp.options.replication_factor * len(set(ipus)) == IPUS[size]
    result = evaluate(exp).result
    assert result.fits, result.memory.report[:2]
    t = result.throughput
    assert t.sequences_per_s == pytest.approx(t.samples_per_s * exp.data.packing.avg_sequences_per_pack)
