"""Pipeline simulation on hand-made stage durations: schedules, ramps, imbalance, IO, and the periodic fast path."""
from __future__ import annotations

import itertools

import pytest

from ipuexp.emulator.pipeline import PipelineSpec, StageWork, simulate


def stages(n: int, fwd: float = 1.0, bwd: float = 2.0, ipus=None, **kw) -> tuple:
    ipus = ipus or list(range(n))
    return tuple(StageWork(stage=s, ipu=ipus[s], fwd_compute=fwd, fwd_exchange=0.0, bwd_compute=bwd,
                           bwd_exchange=0.0, **kw) for s in range(n))


def spec(works, schedule="grouped", mbs=64, training=True, **kw) -> PipelineSpec:
    defaults = dict(link_bytes_per_s=1e9, sync_s=0.0)
    defaults.update(kw)
    return PipelineSpec(stages=tuple(works), schedule=schedule, micro_batches=mbs, training=training, **defaults)


def test_single_stage_runs_micro_batches_back_to_back():
    r = simulate(spec(stages(1, 1.0, 2.0), mbs=10))
    assert r.time_s == pytest.approx(30.0)
    assert r.busy[0]["compute"] == pytest.approx(30.0)


@pytest.mark.parametrize("schedule", ["grouped", "interleaved", "sequential"])
@pytest.mark.parametrize("mbs", [1, 2, 7, 9, 64, 101])
@pytest.mark.parametrize("overlap", [False, True])
def test_periodic_fast_path_equals_cycle_by_cycle(schedule, mbs, overlap):
    works = tuple(StageWork(stage=s, ipu=[0, 1, 2, 0][s], fwd_compute=0.3 + 0.1 * s, fwd_exchange=0.05,
                            bwd_compute=0.7 + 0.05 * s, bwd_exchange=0.02, recompute=0.3 if s < 3 else 0.0,
                            send_fwd_bytes=1e6, send_bwd_bytes=2e6) for s in range(4))
    sp = spec(works, schedule, mbs, sync_s=0.01, io_s=2.0 if overlap else 0.2, io_overlap=overlap,
              io_exposed_s=0.01, host_period_s=1.5)
    fast, slow = simulate(sp), simulate(sp, record_events=True)
    assert fast.time_s == pytest.approx(slow.time_s, rel=1e-12)
    for ipu in fast.busy:
        for cat, v in fast.busy[ipu].items():
            assert v == pytest.approx(slow.busy[ipu][cat], rel=1e-12, abs=1e-12)


def test_grouped_pipeline_is_bound_by_the_longest_stage():
    # Seed 001 4.2: "The pipeline efficiency is bound by the longest stage".
    works = list(stages(4, 1.0, 2.0))
    works[2] = StageWork(stage=2, ipu=2, fwd_compute=2.0, fwd_exchange=0.0, bwd_compute=4.0)
    t1 = simulate(spec(works, mbs=1000)).time_s
    t2 = simulate(spec(works, mbs=2000)).time_s
    assert (t2 - t1) / 1000 == pytest.approx(6.0)  # the slow stage's forward + backward per micro-batch


def test_ramp_share_falls_out_of_the_simulation():
    # Seed 001 4.2: 2N stages are under-used during ramp-up and ramp-down, so the overhead is a fixed number of
    # cycles: time(GA) = GA * steady + ramp, with ramp independent of GA and at most 2(N-1) steady cycles.
    n = 4
    steady = 3.0
    times = {ga: simulate(spec(stages(n), mbs=ga)).time_s for ga in (8, 16, 64, 256, 1024)}
    ramps = {ga: t - ga * steady for ga, t in times.items()}
    assert len({round(v, 9) for v in ramps.values()}) == 1
    ramp = ramps[8]
    assert steady * (n - 1) <= ramp <= steady * 2 * (n - 1)
    efficiency = {ga: ga * steady / t for ga, t in times.items()}
    assert list(efficiency.values()) == sorted(efficiency.values())
    for ga, eff in efficiency.items():
        # Within the seed's bound (a ramp share of at most 2N/(GA+2N)) and at least half a cycle per stage.
        assert ga / (ga + 2 * n) <= eff <= ga / (ga + (n - 1) / 2)


def test_schedules_order_grouped_interleaved_sequential():
    works = stages(4, 1.0, 2.0, send_fwd_bytes=1e6, send_bwd_bytes=1e6)
    t = {s: simulate(spec(works, s, mbs=256, sync_s=0.01)).time_s for s in ("grouped", "interleaved", "sequential")}
    assert t["grouped"] < t["interleaved"] < t["sequential"]
    # Interleaved: a backward runs on some stage in every cycle, two cycles per micro-batch (seed 001 4.2).
    assert t["interleaved"] / 256 == pytest.approx(2 * (2.0 + 0.01 + 1e-3), rel=0.05)
    # Sequential: one pass at a time through all stages; a sync after each pass, a copy after all but the last
    # forward and the first stage's backward.
    assert t["sequential"] / 256 == pytest.approx(4 * 3.0 + 8 * 0.01 + 6 * 1e-3, rel=1e-9)


def test_events_respect_dependencies_and_do_not_overlap():
    works = tuple(StageWork(stage=s, ipu=[0, 1, 2, 0][s], fwd_compute=1.0 + s, fwd_exchange=0.1,
                            bwd_compute=2.0, bwd_exchange=0.1, recompute=0.5 * (s < 3),
                            send_fwd_bytes=1e8, send_bwd_bytes=1e8) for s in range(4))
    for schedule in ("grouped", "interleaved", "sequential"):
        r = simulate(spec(works, schedule, mbs=12, sync_s=0.05), record_events=True)
        by_ipu = {}
        for e in r.events:
            by_ipu.setdefault(e.ipu, []).append(e)
        for evs in by_ipu.values():
            evs.sort(key=lambda e: e.start_s)
            for a, b in zip(evs, evs[1:]):
                assert b.start_s >= a.start_s + a.duration_s - 1e-9
        passes = {(e.category, e.stage, e.micro_batch): e for e in r.events if e.category in ("fwd", "bwd")}
        assert len(passes) == 2 * 4 * 12
        for m, s in itertools.product(range(12), range(4)):
            f, b = passes[("fwd", s, m)], passes[("bwd", s, m)]
            assert b.start_s >= f.start_s + f.duration_s
            if s < 3:
                assert passes[("fwd", s + 1, m)].start_s >= f.start_s + f.duration_s
                assert b.start_s >= passes[("bwd", s + 1, m)].start_s + passes[("bwd", s + 1, m)].duration_s
        assert max(e.start_s + e.duration_s for e in r.events) == pytest.approx(r.time_s)


def test_copies_cross_ipus_only():
    same = simulate(spec(stages(3, ipus=[0, 0, 0], send_fwd_bytes=1e9, send_bwd_bytes=1e9), mbs=8)).time_s
    apart = simulate(spec(stages(3, send_fwd_bytes=1e9, send_bwd_bytes=1e9), mbs=8)).time_s
    nocopy = simulate(spec(stages(3), mbs=8)).time_s
    assert apart > nocopy
    assert same == pytest.approx(8 * 3 * 3.0)  # one IPU: every pass in sequence, no inter-IPU copy


def test_io_tiles_overlap_transfer_with_compute():
    works = stages(1, 1.0, 2.0)
    serial = simulate(spec(works, mbs=10, io_s=1.0)).time_s
    overlap = simulate(spec(works, mbs=10, io_s=1.0, io_overlap=True)).time_s
    io_bound = simulate(spec(works, mbs=10, io_s=5.0, io_overlap=True)).time_s
    assert serial == pytest.approx(40.0)
    assert overlap == pytest.approx(1.0 + 30.0)  # only the first input is not hidden
    assert io_bound == pytest.approx(5.0 + 9 * 5.0 + 3.0)  # the transfer bounds each micro-batch


def test_host_bound_pipeline():
    r = simulate(spec(stages(1, 0.1, 0.2), mbs=10, host_period_s=1.0))
    assert r.time_s == pytest.approx(9 * 1.0 + 0.3)  # the host prepares one micro-batch per second


@pytest.mark.parametrize("schedule", ["grouped", "interleaved", "sequential"])
def test_host_bound_applies_per_micro_batch_whatever_the_schedule(schedule):
    fast = simulate(spec(stages(3, 0.1, 0.2), schedule, mbs=50, host_period_s=1.0)).time_s
    free = simulate(spec(stages(3, 0.1, 0.2), schedule, mbs=50)).time_s
    assert fast >= 49 * 1.0 and fast > free
    assert simulate(spec(stages(3, 0.1, 0.2), schedule, mbs=50, host_period_s=1e-6)).time_s == pytest.approx(free)


def test_inference_runs_forwards_only():
    r = simulate(spec(stages(3), mbs=10, training=False), record_events=True)
    assert {e.category for e in r.events} == {"fwd"}
    assert r.time_s == pytest.approx((10 + 2) * 1.0)
