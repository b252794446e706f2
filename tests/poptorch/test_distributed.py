"""A distributed run's DataLoader share and the instances the prediction counts."""
from __future__ import annotations

import pytest
import torch

import ipuexp.poptorch as poptorch
from ipuexp.poptorch.mapping import options_values


class _Numbers(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 50

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(i)


def _loader(process: int, processes: int, shuffle: bool, drop_last: bool = True) -> poptorch.DataLoader:
    opts = poptorch.Options().randomSeed(7)
    opts.Distributed.configureProcessId(process, processes)
    return poptorch.DataLoader(opts, _Numbers(), batch_size=4, shuffle=shuffle, drop_last=drop_last)


def _epoch(loader: poptorch.DataLoader) -> list:
    return [int(x) for batch in loader for x in batch]


def test_each_process_reads_its_own_block():
    epochs = [_epoch(_loader(p, 3, shuffle=False)) for p in range(3)]
    assert epochs == [list(range(0, 16)), list(range(16, 32)), list(range(32, 48))]  # 4 batches of 4 each
    shares = [len(_loader(p, 3, shuffle=False, drop_last=False).dataset) for p in range(3)]
    assert shares == [17, 17, 16]


def test_shuffling_is_global_and_new_each_epoch():
    loaders = [_loader(p, 2, shuffle=True) for p in range(2)]
    first = [_epoch(loader) for loader in loaders]
    assert not set(first[0]) & set(first[1])  # one permutation shared out: no sample read twice
    second = [_epoch(loader) for loader in loaders]
    assert sorted(first[0]) != sorted(second[0])
    assert len(first[0]) == len(first[1]) == 24 and len(set(first[0] + first[1])) == 48  # 2 left over


def test_shuffling_needs_the_seed():
    opts = poptorch.Options()
    opts.Distributed.configureProcessId(0, 2)
    loader = poptorch.DataLoader(opts, _Numbers(), batch_size=4, shuffle=True)
    with pytest.raises(poptorch.Error, match="randomSeed"):
        iter(loader)


def test_the_prediction_counts_every_instance_s_replicas():
    opts = poptorch.Options().replicationFactor(2)
    opts.Distributed.configureProcessId(1, 4)
    values = options_values(opts, True).values
    assert values["options.replication_factor"] == 8 and values["options.num_instances"] == 4
    with pytest.raises(poptorch.Error, match="process id must be in"):
        poptorch.Options().Distributed.configureProcessId(4, 4)
