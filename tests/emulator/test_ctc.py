"""The CTC loss costed as PopLibs plans it (``popnn::ctc``): a recurrence over the frames."""
from __future__ import annotations

import pytest

from ipuexp.emulator.ctc import ALPHA_PER_SYMBOL, GRAD_PER_SYMBOL, ctc_cycles


def test_the_vertex_estimates_are_poplibs():
    assert (ALPHA_PER_SYMBOL, GRAD_PER_SYMBOL) == (44, 84)


def test_a_small_problem_by_hand():
    # 4 frames, 1 sequence, 1 symbol: two time partitions run alpha and beta from both ends in 2 steps, each step
    # 6 workers x (44 + 84) cycles of compute, 2 x (100 exchange + 90 sync) and 6 elements of 4 bytes at 4 B/cycle
    compute, exchange = ctc_cycles(4, 1, 1, 1472, 6, 4.0)
    assert compute == 2 * 6 * (44 + 84)
    assert exchange == 2 * (200 + 180 + 6)


def test_frames_set_the_steps_and_the_tiles_bound_the_partitions():
    short, long = ctc_cycles(100, 2, 50, 1472, 6, 4.0), ctc_cycles(400, 2, 50, 1472, 6, 4.0)
    assert sum(long) == pytest.approx(4 * sum(short), rel=0.02)
    # with few tiles the label cannot be split as finely: each step costs more
    assert sum(ctc_cycles(100, 2, 50, 8, 6, 4.0)) > 2 * sum(short)


def test_a_ctc_capture_records_the_problem_shape():
    pytest.importorskip("transformers")
    from ipuexp.config.schema import HFModelConfig, ModelConfig
    from ipuexp.graph.capture import capture_model
    from ipuexp.models import build_model

    cfg = ModelConfig(name="hf", hf=HFModelConfig(config="wav2vec2-base", task="ctc", target_length=32),
                      sequence_length=16000)
    graph = capture_model(lambda: build_model(cfg), 2)
    ctc = [op for b in graph.blocks for op in b.ops if op.kind == "ctc"]
    assert len(ctc) == 1 and ctc[0].matmul_shape == [49, 2, 32] and ctc[0].phase == "fwd"
