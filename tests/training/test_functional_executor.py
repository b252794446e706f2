"""Executor numerics: replicas x accumulation factorings, schedules, recomputation, reduction, output modes,
precision and loss scaling, against each other and against a plain PyTorch loop."""
from __future__ import annotations

import pytest
import torch
from functional_fixtures import call_batch, executor, tiny_data, tiny_model, train, weights

from ipuexp.execution.schedule import stash_depth


def max_diff(a, b):
    return max(float((x.float() - y.float()).abs().max()) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def data():
    return tiny_data()


def test_same_global_batch_same_losses_whatever_the_factoring(data):
    """Seed 004: 1 to 16 replicas give identical training curves at the same global batch."""
    runs = {}
    for r, ga in [(1, 8), (2, 4), (4, 2), (8, 1)]:
        ex = executor(r=r, ga=ga, di=2)
        losses = train(ex, data, 4)
        runs[(r, ga)] = (losses, weights(ex))
    ref_losses, ref_w = runs[(1, 8)]
    assert ref_losses[-1] < ref_losses[0]  # it learns
    for key, (losses, w) in runs.items():
        assert max(abs(a - b) for a, b in zip(losses, ref_losses)) <= 1e-5, key
        assert max_diff(w, ref_w) <= 1e-5, key


@pytest.mark.parametrize("layers_per_ipu", [[2, 1, 1], [1, 1, 1, 1], []])
def test_schedules_give_the_same_weights(data, layers_per_ipu):
    results = {}
    for schedule in ("grouped", "interleaved", "sequential"):
        ex = executor(schedule=schedule, layers_per_ipu=layers_per_ipu, ga=6, di=2)
        results[schedule] = (train(ex, data, 3), weights(ex))
    for schedule in ("interleaved", "sequential"):
        assert results[schedule][0] == results["grouped"][0]
        assert all(torch.equal(a, b) for a, b in zip(results[schedule][1], results["grouped"][1]))


@pytest.mark.parametrize("layers_per_ipu", [[2, 1, 1], [1, 1, 1, 1]])
@pytest.mark.parametrize("schedule", ["grouped", "interleaved", "sequential"])
def test_measured_stash_is_the_memory_models(data, schedule, layers_per_ipu):
    """The micro-batches each stage really held between its forward and backward are the stash FIFO depths the
    memory model charges (``ipuexp.execution.schedule.stash_depth``)."""
    ex = executor(schedule=schedule, layers_per_ipu=layers_per_ipu, ga=12, di=1)
    train(ex, data, 1)
    stages = ex.plan.num_stages
    assert stages == len(layers_per_ipu)
    assert ex.stash_peak == [stash_depth(schedule, s, stages) for s in range(stages)]


def count_forwards(ex):
    """Forward passes started per block (pre-hooks: a recomputation stops once it has what backward needs)."""
    counts = {b.name: 0 for b in ex.model.blocks}
    for b in ex.model.blocks:
        b.register_forward_pre_hook(lambda mod, args: counts.__setitem__(mod.name, counts[mod.name] + 1))
    return counts


@pytest.mark.parametrize("rec,every_layer,recomputed", [
    ("none", False, set()),
    ("pipeline", False, {"embed", "L0", "L1", "L2", "L3", "head"}),
    ("pipeline", True, {"L0", "L1", "L2", "L3"}),
    ("all", False, {"embed", "L0", "L1", "L2", "L3", "head"}),
])
def test_recomputation_reruns_forwards_and_keeps_the_numbers(data, rec, every_layer, recomputed):
    ref = executor(rec="none", ga=4)
    ref_losses = train(ref, data, 2)
    ex = executor(rec=rec, every_layer=every_layer, ga=4)
    counts = count_forwards(ex)
    losses = train(ex, data, 2)
    assert losses == ref_losses
    assert all(torch.equal(a, b) for a, b in zip(weights(ex), weights(ref)))
    micro_batches = 2 * 4
    assert {name for name, n in counts.items() if n == 2 * micro_batches} == recomputed
    assert all(n == micro_batches for name, n in counts.items() if name not in recomputed)


def test_pipelined_executor_matches_a_plain_loop_bit_for_bit(data):
    """The same arithmetic as model(x).backward() per micro-batch, gradients summed then divided by GA."""
    ex = executor(ga=4, di=3, rec="none", opt="adamw")
    plain = tiny_model(0)
    opt = torch.optim.AdamW(plain.parameters(), lr=0.01, betas=(0.9, 0.999), weight_decay=0.01)
    for c in range(2):
        batch = call_batch(ex, data, c)
        ex.train_call(batch)
        x, y = batch
        for d in range(3):
            for m in range(4):
                loss, _ = plain(x[d, 0, m], y[d, 0, m])
                loss.backward()
            for p in plain.parameters():
                p.grad.div_(4)
            opt.step()
            opt.zero_grad()
    assert all(torch.equal(a, b.detach()) for a, b in zip(ex.params, plain.parameters()))


def test_sum_reduction_scales_the_update(data):
    """ReductionType.Sum: the accumulated gradient is GA x replicas times the mean's (plain SGD shows it)."""
    w0 = weights(executor(opt="sgd"))
    moved = {}
    for reduction in ("mean", "sum"):
        ex = executor(opt="sgd", lr=1e-2, wd=0.0, reduction=reduction, r=2, ga=3)
        ex.train_call(call_batch(ex, data, 0))
        moved[reduction] = [a - b for a, b in zip(weights(ex), w0)]
    for m, s in zip(moved["mean"], moved["sum"]):
        torch.testing.assert_close(s, 6 * m, rtol=1e-3, atol=1e-6)  # w - w0 carries w's rounding (~3e-8)


def test_output_modes(data):
    outs = {}
    for mode in ("all", "final", "sum"):
        ex = executor(out=mode, r=2, ga=3, di=2)
        outs[mode] = ex.train_call(call_batch(ex, data, 0))
    a, f, s = outs["all"], outs["final"], outs["sum"]
    assert a.losses.shape == (2 * 2 * 3,) and a.loss_count == 12 and a.logits.shape == (12 * 4, 3)
    assert a.labels.shape == (48,) and a.iterations == 2 and a.updates == 2
    # final: each replica's last micro-batch of the last iteration; order (iteration, replica, micro-batch)
    per = a.losses.reshape(2, 2, 3)
    assert torch.equal(f.losses, per[-1, :, -1]) and f.loss_count == 2
    assert torch.equal(f.logits, a.logits.reshape(2, 2, 3, 4, 3)[-1, :, -1].reshape(-1, 3))
    # sum: each replica's sum over the call, standing for all 12 micro-batch losses
    torch.testing.assert_close(s.losses, per.sum(dim=(0, 2)))
    assert s.loss_count == 12 and s.labels is None and s.correct() == (0, 0)
    assert s.mean_loss == pytest.approx(a.mean_loss, rel=1e-6)
    correct, rows = a.correct()
    assert rows == 48 and correct == int((a.logits.argmax(1) == a.labels).sum())


def test_inference_returns_every_output(data):
    ex = executor(ga=2, r=2)
    x, y = data
    batch = [x[:40].reshape(5, 2, 1, 4, 8), y[:40].reshape(5, 2, 1, 4)]
    out = ex.infer_call(batch)
    assert out.losses.shape == (10,) and out.logits.shape == (40, 3) and out.updates == 0
    assert torch.equal(out.labels, y[:40])
    with torch.no_grad():
        _, logits = ex.model(x[:40], y[:40])
    torch.testing.assert_close(out.logits, logits)
    assert all(torch.equal(a, b) for a, b in zip(weights(ex), weights(executor(ga=2, r=2))))  # no update


def test_power_of_two_loss_scale_is_exact_in_fp32(data):
    ref = executor()
    scaled = executor(ls=1024.0)
    train(ref, data, 2)
    train(scaled, data, 2)
    assert all(torch.equal(a, b) for a, b in zip(weights(ref), weights(scaled)))


@pytest.mark.parametrize("precision", ["16.16", "16.32"])
def test_half_precision_runs_in_fp16_and_tracks_fp32(data, precision):
    ref = executor()
    ex = executor(precision=precision, ls=256.0)
    ref_losses, losses = train(ref, data, 4), train(ex, data, 4)
    assert all(p.dtype == torch.float16 for p in ex.params)
    assert all(m.dtype == torch.float32 for m in ex.master)
    assert max(abs(a - b) for a, b in zip(losses, ref_losses)) < 2e-2
    representable = all(torch.equal(m, m.half().float()) for m in ex.master)
    # 16.16 stores fp16 weights only; 16.32 keeps fp32 master weights between updates
    assert representable == (precision == "16.16")
    assert all(torch.equal(p.float(), m.half().float()) for p, m in zip(ex.params, ex.master))


def test_stochastic_rounding_changes_the_fp16_weights_reproducibly(data):
    rn, sr, sr2 = executor(precision="16.16"), executor(precision="16.16", sr=True), executor(precision="16.16",
                                                                                             sr=True)
    for ex in (rn, sr, sr2):
        train(ex, data, 3)
    assert not all(torch.equal(a, b) for a, b in zip(weights(rn), weights(sr)))
    assert all(torch.equal(a, b) for a, b in zip(weights(sr), weights(sr2)))  # seeded
    assert max_diff(weights(rn), weights(sr)) < 5e-3


def test_automatic_loss_scaling_skips_overflowing_updates(data):
    ex = executor(precision="16.16", als=True, ls=2.0 ** 40)
    before = weights(ex)
    out = ex.train_call(call_batch(ex, data, 0))
    # a scaled loss of ~2**40 overflows fp16: the update is skipped and the scale halved
    assert out.updates == 0 and ex.scaler.skipped == 1 and ex.scaler.scale == 2.0 ** 39
    assert all(torch.equal(a, b) for a, b in zip(before, weights(ex)))
    ok = executor(precision="16.16", als=True, ls=16.0)
    ok.train_call(call_batch(ok, data, 0))
    assert ok.scaler.scale == 32.0 and ok.scaler.skipped == 0  # nothing near fp16's range: doubled


def test_half_optimizer_state(data):
    ex = executor(state="half", opt="adam")
    train(ex, data, 2)
    states = [t for s in ex.optimizer.state.values() for t in s.values() if torch.is_tensor(t) and t.dim() > 0]
    assert states and all(torch.equal(t, t.half().float()) for t in states)


def test_state_round_trip_continues_identically(data):
    a = executor(precision="16.16", sr=True, als=True, ls=64.0)
    train(a, data, 2)
    state = a.state_dict()
    b = executor(precision="16.16", sr=True, als=True, ls=64.0, model_seed=5)
    b.load_state_dict(state)
    la = a.train_call(call_batch(a, data, 2)).mean_loss
    lb = b.train_call(call_batch(b, data, 2)).mean_loss
    assert la == lb and all(torch.equal(x, y) for x, y in zip(weights(a), weights(b)))
    assert a.scaler.scale == b.scaler.scale and a.updates == b.updates == 3
