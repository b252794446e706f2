"""The job's comparison of a measurement with the prediction (``measured.*``)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from ipuexp.runner.evaluation import measured_figures
from ipuexp.result import IPUMemory, MemoryFigures, ModelFigures, Result, ThroughputFigures


def sample_result(throughput: float = 1000.0, ipu_bytes: int = 500_000_000, ipus: int = 4) -> Result:
    memory = [IPUMemory(ipu=i, capacity_bytes=1472 * 638976, total_bytes=ipu_bytes + i, always_live_bytes=0,
                        not_always_live_bytes=ipu_bytes + i, max_tile_bytes=400_000, max_tile=7, fits=True)
              for i in range(ipus)]
    model = ModelFigures(name="bert_large", parameters=1, flops_per_sample=1.0, fwd_flops_per_sample=1.0,
                         bwd_flops_per_sample=1.0, num_stages=ipus, ipus_per_replica=ipus, capture_seconds=0.0)
    return Result(recipe="bert_large", model=model, fits=True, memory=MemoryFigures(fits=True, ipus=memory),
                  throughput=ThroughputFigures(samples_per_s=throughput, step_time_s=1.0, bubble_fraction=0.0,
                                               utilisation=[1.0] * ipus))


def _exp(samples=None, memory=None):
    return SimpleNamespace(measured=SimpleNamespace(samples_per_s=samples, ipu_memory_bytes=memory))


def test_nothing_measured_is_nothing_logged():
    assert measured_figures(_exp(), sample_result()) is None


# The band bounds predicted / measured - 1: 1,000 ±10% holds 910 (+9.9%) and 1,105 (-9.5%), not 905 (+10.5%).
@pytest.mark.parametrize("measured, band, inside", [(910.0, 10.0, True), (905.0, 10.0, False), (1105.0, 10.0, True),
                                                    (1115.0, 10.0, False), (895.0, None, None)])
def test_ratio_and_band(measured, band, inside):
    result = sample_result(throughput=1000.0)
    result.throughput.error_band_pct = band
    m = measured_figures(_exp(measured), result)
    assert m.over_predicted == pytest.approx(measured / 1000.0) and m.in_band is inside


def test_packed_data_compares_sequences_and_memory_the_fullest_ipu():
    result = sample_result(throughput=1000.0, ipu_bytes=500_000_000, ipus=4)
    result.throughput.sequences_per_s = 2000.0  # two sequences a pack
    m = measured_figures(_exp(1900.0, 515_000_000), result)
    assert m.over_predicted == pytest.approx(0.95)
    assert m.memory_over_predicted == pytest.approx(515_000_000 / 500_000_003)  # IPU 3 is the fullest
