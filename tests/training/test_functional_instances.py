"""Instances (PopRun style) and replicas on real MNIST: the same global batch gives the same losses step by step."""
from __future__ import annotations

import pytest
import torch
from functional_fixtures import experiment, needs_mnist

from ipuexp.training.instances import LocalInstances, RayInstances, start_instances

CALLS = 6


def losses_of(pool, first=0):
    """Mean returned loss of host calls first..CALLS-1 of epoch 0, over all instances."""
    out = []
    for c in range(first, CALLS):
        results = pool.map("train_call", 0, c)
        out.append(sum(r.loss_sum for r in results) / sum(r.loss_count for r in results))
    return out


def mnist(**kw):
    # fp32, all outputs back to the host; micro-batch 4, 8 micro-batches per update over all replicas
    return experiment(mnist=True, mbs=4, layers_per_ipu=[1, 1, 1, 1], out="all", lr=0.001, **kw)


@pytest.fixture(scope="module")
def reference():
    pool = LocalInstances(mnist(r=1, ga=8))
    try:
        return losses_of(pool), pool.map("weights")[0]
    finally:
        pool.close()


@needs_mnist
@pytest.mark.parametrize("r,ga", [(2, 4), (4, 2)])
def test_replicas_match_one_replica(reference, r, ga):
    pool = start_instances(mnist(r=r, ga=ga))
    assert isinstance(pool, LocalInstances)
    try:
        losses = losses_of(pool)
        w = pool.map("weights")[0]
    finally:
        pool.close()
    ref_losses, ref_w = reference
    assert ref_losses[-1] < ref_losses[0]
    assert max(abs(a - b) for a, b in zip(losses, ref_losses)) <= 1e-5
    assert max(float((a - b).abs().max()) for a, b in zip(w, ref_w)) <= 1e-5


@needs_mnist
@pytest.mark.slow
def test_two_instances_match_one_instance(reference):
    """Two Ray actors, one replica each, gloo all-reduce: the curve of one instance with two replicas."""
    from ipuexp.runner.cluster import RaySettings, session

    exp = mnist(r=2, ga=4, inst=2)
    with session(RaySettings(address=None, num_cpus=2, object_store_memory=200_000_000, log_to_driver=True)):
        pool = start_instances(exp)
        assert isinstance(pool, RayInstances)
        try:
            results = pool.map("train_call", 0, 0)
            # each instance consumes its own half of the host call (sharded per instance, then per replica)
            assert [r.samples for r in results] == [16, 16]
            losses = [sum(r.loss_sum for r in results) / sum(r.loss_count for r in results)]
            losses += losses_of(pool, 1)
            w0, w1 = pool.map("weights")
        finally:
            pool.close()
    ref_losses, ref_w = reference
    assert max(abs(a - b) for a, b in zip(losses, ref_losses)) <= 1e-5
    # instances start from instance 0's weights and stay identical after every all-reduced update
    assert all(torch.equal(a, b) for a, b in zip(w0, w1))
    assert max(float((a - b).abs().max()) for a, b in zip(w0, ref_w)) <= 1e-5

