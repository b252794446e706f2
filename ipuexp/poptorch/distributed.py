"""A distributed run's share of a map-style dataset (``Options.Distributed.configureProcessId(i, n)`` with the
DataLoader's ``auto_distributed_partitioning``), as PopTorch partitions it: process ``i`` reads the ``i``-th of
``n`` consecutive blocks of the dataset, each a whole number of combined batches (with ``drop_last=False``: the
samples shared out as evenly as they go). Shuffling is global: every process draws the same permutation of the
whole dataset from ``Options.randomSeed`` and its generator's state carries on from epoch to epoch, so the
processes never read the same sample and each epoch reads a new order; the samples a block leaves over are read
on the next epoch, the block shifted by them."""
from __future__ import annotations

from typing import Any, Optional

import torch


class ProcessShare(torch.utils.data.Dataset):
    """Process ``options.Distributed.processId``'s block of ``dataset``."""

    def __init__(self, dataset: Any, options: Any, combined_batch: int, drop_last: bool) -> None:
        n, i = options.Distributed.numProcesses, options.Distributed.processId
        total = len(dataset)
        if drop_last:
            per_process = combined_batch * (total // (combined_batch * n))
            self._start = i * per_process
            self._length = min(per_process, total - self._start)
            self._left_over = total % per_process if per_process else 0
        else:
            sizes = [total // n + (total % n > p) for p in range(n)]
            self._start, self._length, self._left_over = sum(sizes[:i]), sizes[i], 0
        # Shared with the loader's worker processes, which see each epoch's shift.
        self._offset = torch.tensor([self._start]).share_memory_()
        self._dataset = dataset
        self._seed: Optional[int] = options.random_seed
        self._generator: Optional[torch.Generator] = None
        self._order: Optional[torch.Tensor] = None

    def next_epoch(self) -> None:
        """A new global order (shuffling only), and the block shifted over the samples the last one left."""
        if self._generator is None:
            if self._seed is None:
                from ipuexp.poptorch.errors import Error

                raise Error("When using auto_distributed_partitioning you must set poptorch.Options.randomSeed() "
                            "to ensure that tensors are in the same order in all processes.")
            self._generator = torch.Generator().manual_seed(int(self._seed))
        order = torch.randperm(len(self._dataset), generator=self._generator)
        if self._order is None:
            self._order = order.share_memory_()  # the loader's worker processes see each new order
        else:
            self._order.copy_(order)
        start = int(self._offset[0])
        self._offset[0] = self._start + self._left_over if start == self._start else self._start

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> Any:
        where = index + int(self._offset[0])
        return self._dataset[int(self._order[where]) if self._order is not None else where]
