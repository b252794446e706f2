import json

import pytest

from ipuexp.result import FunctionalFigures
from ipuexp.tracking import curated
from ipuexp.tracking.identity import resolved

TILE = 638976


def test_params_are_the_key_options_then_the_swept_keys(make_cfg):
    data = resolved(make_cfg("+recipe=bert_large", "options.loss_scaling=128", "system=pod64"))
    params = curated.params(data, ["options.loss_scaling", "system", "options.gradient_accumulation"],
                            ["+recipe=bert_large", "options.loss_scaling=128", "system=pod64"])
    assert list(params) == [*curated.KEY_OPTIONS, "options.loss_scaling"]  # a key option swept is logged once
    assert params["model"] == "bert_large" and params["ipu"] == "mk2" and params["system"] == "pod64"
    assert params["options.loss_scaling"] == "128.0"
    assert params["options.gradient_accumulation"] == str(data["options"]["gradient_accumulation"])
    assert params["options.pipeline.schedule"] == "grouped"  # enum by name
    assert params["options.recomputation.mode"] == data["options"]["recomputation"]["mode"]
    amp = data["options"]["available_memory_proportion"]
    assert params["options.available_memory_proportion"] == (json.dumps(amp) if isinstance(amp, list) else str(amp))
    assert not any(k.split(".")[-1].isdigit() for k in params)  # no list indices


def test_a_swept_group_without_fields_takes_the_override_value():
    data = {"model": {"name": "bert", "size": "large"}, "system": {"name": "pod16"}, "ipu": {"name": "mk2"},
            "sweep": {"note": "a preset's own node"}}
    params = curated.params(data, ["sweep", "absent.key"], ["+sweep=ga_di_io", "absent.key=7"])
    assert params["sweep"] == "ga_di_io" and params["absent.key"] == "7"
    assert "options.gradient_accumulation" not in params  # absent from this config: not logged


def test_metrics_are_the_headline_figures(make_result):
    result = make_result(throughput=800.0, ipu_bytes=500_000_000)
    result.throughput.peak_flops_bound_samples_per_s = 3200.0
    capacity = result.memory.ipus[0].capacity_bytes
    assert curated.metrics(result, TILE) == pytest.approx({
        "fits": 1.0, "throughput_samples_per_s": 800.0, "step_time_s": 1.0, "mfu": 0.25,
        "peak_ipu_memory_bytes": 500_000_003,  # the fullest of the four IPUs
        "ipu_headroom_bytes": capacity - 500_000_003,
        "peak_tile_memory_bytes": 400_000, "tile_headroom_bytes": TILE - 400_000})
    names = list(curated.metrics(result, TILE))
    assert names == [k for k in curated.METRICS if k in names]  # logged in METRICS' order: throughput first
    assert names[0] == "throughput_samples_per_s"


def test_error_band_follows_the_throughput(make_result):
    result = make_result(throughput=800.0, ipu_bytes=500_000_000)
    assert "error_band_pct" not in curated.metrics(result, TILE)
    result.throughput.error_band_pct = 9.0
    figures = curated.metrics(result, TILE)
    assert figures["error_band_pct"] == 9.0
    assert list(figures)[:3] == ["throughput_samples_per_s", "step_time_s", "error_band_pct"]


def test_metrics_of_an_overflowing_or_functional_run(make_result):
    result = make_result(fits=False)
    result.memory.ipus[2].max_tile_bytes = TILE + 1000
    figures = curated.metrics(result, TILE)
    assert figures["fits"] == 0.0 and figures["tile_headroom_bytes"] == -1000
    assert "mfu" not in figures  # the result gives no peak-FLOPs bound
    result.functional = FunctionalFigures(final_loss=0.25, samples_per_s=120.0, test_accuracy=0.97)
    assert {k: v for k, v in curated.metrics(result).items() if k in ("measured_samples_per_s", "final_loss",
                                                                      "test_accuracy")} == \
        {"measured_samples_per_s": 120.0, "final_loss": 0.25, "test_accuracy": 0.97}
    assert "tile_headroom_bytes" not in curated.metrics(result)  # tile memory unknown


def test_a_measurement_is_logged_with_its_ratio(make_result):
    from ipuexp.result import MeasuredFigures

    result = make_result(throughput=1000.0)
    result.measured = MeasuredFigures(samples_per_s=900.0, ipu_memory_bytes=520_000_000, over_predicted=0.9,
                                      memory_over_predicted=1.04)
    figures = curated.metrics(result, TILE)
    assert {k: figures[k] for k in figures if k.startswith("measured")} == pytest.approx({
        "measured_samples_per_s": 900.0, "measured_over_predicted": 0.9, "measured_ipu_memory_bytes": 520e6,
        "measured_over_predicted_memory": 1.04})
    assert set(figures) <= set(curated.METRICS)


def test_a_functional_run_compares_its_host_rate_unless_an_ipu_measurement_is_given(make_result):
    from ipuexp.result import MeasuredFigures

    result = make_result(throughput=1000.0)
    result.functional = FunctionalFigures(final_loss=0.25, samples_per_s=120.0)
    figures = curated.metrics(result)
    assert figures["measured_samples_per_s"] == 120.0 and figures["measured_over_predicted"] == pytest.approx(0.12)
    result.measured = MeasuredFigures(samples_per_s=950.0, over_predicted=0.95)
    figures = curated.metrics(result)
    assert figures["measured_samples_per_s"] == 950.0 and figures["measured_over_predicted"] == 0.95
    assert figures["host_samples_per_s"] == 120.0
