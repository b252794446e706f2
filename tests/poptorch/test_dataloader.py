"""poptorch.DataLoader beyond plain batching: a user's batch_sampler (its batches joined into combined batches, a
custom batch type rebuilt by its parser) and AsyncRebatched (workers' batches cut again across their boundaries)."""
from __future__ import annotations

import pytest
import torch

import ipuexp.poptorch as poptorch


class _Numbered(torch.utils.data.Dataset):
    def __len__(self):
        return 23

    def __getitem__(self, i):
        return torch.tensor([float(i)]), torch.tensor(i)


def _samples(batches):
    return [int(v) for b in batches for v in b[1]]


@pytest.mark.parametrize("drop_last, sizes", [(True, [6, 6, 6]), (False, [6, 6, 6, 2])])
def test_batch_sampler_batches_are_combined(drop_last, sizes):
    opts = poptorch.Options().deviceIterations(3)
    sampler = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(20)), batch_size=2,
                                            drop_last=False)
    loader = poptorch.DataLoader(opts, _Numbered(), batch_sampler=sampler, drop_last=drop_last)
    batches = list(loader)
    assert [len(b[0]) for b in batches] == sizes and len(loader) == len(sizes)
    assert _samples(batches) == list(range(sum(sizes)))


def test_batch_sampler_excludes_batch_size_and_shuffle():
    sampler = torch.utils.data.BatchSampler(range(8), batch_size=2, drop_last=False)
    with pytest.raises(poptorch.Error, match="mutually exclusive with batch_size, shuffle"):
        poptorch.DataLoader(poptorch.Options(), _Numbered(), batch_size=2, batch_sampler=sampler)


class _Pair:
    def __init__(self, data, label):
        self.data, self.label = data, label


class _PairParser(poptorch.ICustomArgParser):
    def yieldTensors(self, struct):
        yield struct.data
        yield struct.label

    def reconstruct(self, original_structure, tensor_iterator):
        return _Pair(*tensor_iterator)


def test_batch_sampler_custom_batch_type():
    poptorch.registerCustomArgParser(_Pair, _PairParser())
    try:
        opts = poptorch.Options().deviceIterations(2)
        sampler = torch.utils.data.BatchSampler(range(12), batch_size=3, drop_last=True)
        loader = poptorch.DataLoader(opts, _Numbered(), batch_sampler=sampler,
                                     collate_fn=lambda items: _Pair(*map(torch.stack, zip(*items))))
        batches = list(loader)
        assert all(isinstance(b, _Pair) and b.data.shape == (6, 1) for b in batches)
        assert [int(v) for b in batches for v in b.label] == list(range(12))
    finally:
        poptorch.registerCustomArgParser(_Pair, None)


class _Stream(torch.utils.data.IterableDataset):
    """Each of the workers streams its own share of 0..n-1."""

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        k, of = (info.id, info.num_workers) if info else (0, 1)
        return iter(torch.tensor([float(i)]) for i in range(k, 21, of))


@pytest.mark.parametrize("drop_last, count", [(True, 20), (False, 21)])
def test_async_rebatched_cuts_across_workers(drop_last, count):
    """Three workers with 7 samples each: torch alone would drop each worker's short batch (3 x 3 samples);
    rebatching keeps every sample but the last incomplete combined batch."""
    loader = poptorch.DataLoader(poptorch.Options(), _Stream(), batch_size=4, num_workers=3, drop_last=drop_last,
                                 mode=poptorch.DataLoaderMode.AsyncRebatched, rebatched_worker_size=2)
    batches = list(loader)
    assert all(len(b) == 4 for b in batches[:-1])
    values = sorted(int(v) for b in batches for v in b)
    assert len(values) == count and len(set(values)) == count


def test_rebatched_worker_size_bounded():
    with pytest.raises(poptorch.Error, match=r"rebatched_worker_size \(8\) must be <="):
        poptorch.DataLoader(poptorch.Options(), _Numbered(), batch_size=4, rebatched_worker_size=8,
                            mode=poptorch.DataLoaderMode.AsyncRebatched)


def test_batch_size_none_loads_one_sample_at_a_time():
    data = [torch.full((2,), float(i)) for i in range(3)]
    loader = poptorch.DataLoader(poptorch.Options(), data, batch_size=None)
    assert loader.combinedBatchSize is None and len(loader) == 3
    assert [t.tolist() for t in loader] == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
