"""Host-call batching: PopTorch's sample count, sharding per instance then replica, invariance of each update."""
from __future__ import annotations

import pytest
import torch

from ipuexp.training.batching import BatchLayout, epoch_order, host_calls, instance_indices


def test_samples_per_call_is_poptorchs_product():
    layout = BatchLayout(micro_batch_size=40, gradient_accumulation=10, device_iterations=10, replicas=4, instances=2)
    assert layout.samples_per_call == 40 * 10 * 10 * 4
    assert layout.samples_per_iteration == 40 * 10 * 4
    assert layout.local_replicas == 2


def test_training_drops_the_incomplete_call_inference_keeps_whole_iterations():
    train = BatchLayout(40, 10, 10, 1)
    assert host_calls(8000, train) == [(0, 10), (4000, 10)]
    assert host_calls(8399, train) == [(0, 10), (4000, 10)]
    infer = BatchLayout(8, 1, 100, 1)  # the tutorial's inference: micro-batch 8, 100 device iterations
    assert host_calls(2000, infer, drop_last=False) == [(0, 100), (800, 100), (1600, 50)]
    assert host_calls(2005, infer, drop_last=False)[-1] == (1600, 50)  # 5 left over: less than a micro-batch


def test_epoch_order_is_a_seeded_permutation():
    a, b = epoch_order(100, 7, 0), epoch_order(100, 7, 0)
    assert torch.equal(a, b) and sorted(a.tolist()) == list(range(100))
    assert not torch.equal(a, epoch_order(100, 7, 1)) and not torch.equal(a, epoch_order(100, 8, 0))
    assert epoch_order(5, 7, 0, shuffle=False).tolist() == [0, 1, 2, 3, 4]


def shares(order, layout, start, iters):
    """indices[instance][iteration][replica][micro-batch] for one call."""
    return [instance_indices(order, start, iters, layout, i) for i in range(layout.instances)]


def test_instances_and_replicas_get_disjoint_shards_covering_the_call():
    layout = BatchLayout(micro_batch_size=2, gradient_accumulation=3, device_iterations=2, replicas=4, instances=2)
    order = epoch_order(200, 1, 0)
    parts = shares(order, layout, 48, 2)
    assert all(p.shape == (2, 2, 3, 2) for p in parts)
    flat = torch.cat([p.reshape(-1) for p in parts])
    assert sorted(flat.tolist()) == sorted(order[48:96].tolist())  # the call's block, each sample once
    # instance i's samples of iteration d are one contiguous piece of the iteration's block: instance, then replica
    for d in range(2):
        block = order[48 + d * 24: 48 + (d + 1) * 24]
        assert torch.equal(parts[0][d].reshape(-1), block[:12]) and torch.equal(parts[1][d].reshape(-1), block[12:])
        assert torch.equal(parts[0][d][1].reshape(-1), block[6:12])


@pytest.mark.parametrize("replicas,ga,instances", [(1, 8, 1), (2, 4, 1), (4, 2, 1), (2, 4, 2), (4, 2, 4), (8, 1, 2)])
def test_each_update_sees_the_same_global_batch(replicas, ga, instances):
    reference = BatchLayout(4, 8, 3, 1)
    layout = BatchLayout(4, ga, 3, replicas, instances)
    order = epoch_order(1000, 3, 0)
    ref = shares(order, reference, 96, 3)[0]
    got = shares(order, layout, 96, 3)
    for d in range(3):
        expected = sorted(ref[d].reshape(-1).tolist())
        assert sorted(torch.cat([g[d].reshape(-1) for g in got]).tolist()) == expected
        # and the same micro-batches: micro-batch j of the update is samples 4j..4j+3 of its block
        mbs = {tuple(g[d][r][m].tolist()) for g in got for r in range(g.shape[1]) for m in range(ga)}
        assert mbs == {tuple(ref[d][0][m].tolist()) for m in range(8)}


@pytest.mark.parametrize("kwargs,message", [
    (dict(micro_batch_size=0, gradient_accumulation=1, device_iterations=1, replicas=1),
     "data.micro_batch_size: 0 is not allowed; allowed: an integer >= 1"),
    (dict(micro_batch_size=1, gradient_accumulation=1, device_iterations=1, replicas=3, instances=2),
     "options.num_instances: 2 is not allowed with replication_factor 3; allowed: a divisor"),
    (dict(micro_batch_size=1, gradient_accumulation=0, device_iterations=1, replicas=1),
     "options.gradient_accumulation: 0"),
])
def test_bad_layouts(kwargs, message):
    with pytest.raises(AssertionError):  # validated with the config; an invariant here
        BatchLayout(**kwargs)
