"""``poptorch.DataLoader``: torch's DataLoader whose batches are PopTorch's combined batches (batch size x device
iterations x gradient accumulation x replicas), with PopTorch's drop-last rule, a user's ``batch_sampler`` and
``AsyncRebatched``'s rebatching (``ipuexp.poptorch.rebatch``); ``AsynchronousDataAccessor``."""
from __future__ import annotations

from typing import Any, Optional

import torch

from ipuexp.poptorch.enums import DataLoaderMode
from ipuexp.poptorch.errors import Error
from ipuexp.poptorch.rebatch import combined_batches, rebatched

from ipuexp.poptorch.logs import log


class DataLoader(torch.utils.data.DataLoader):
    """Each batch holds ``batch_size * options.device_iterations * options.Training.gradient_accumulation *
    options.replication_factor`` samples. ``drop_last=True`` (the default) drops an incomplete last batch; with
    ``drop_last=False`` a warning names the size of the shorter last batch, as PopTorch's does. ``mode`` (Sync,
    Async, AsyncRebatched) reads the same samples in the same order."""

    def __init__(self, options: Any, dataset: Any, batch_size: int = 1, shuffle: Optional[bool] = None,
                 num_workers: int = 0, drop_last: bool = True, persistent_workers: Optional[bool] = None,
                 auto_distributed_partitioning: bool = True, mode: DataLoaderMode = DataLoaderMode.Sync,
                 async_options: Optional[dict] = None, rebatched_worker_size: Optional[int] = None,
                 batch_sampler: Any = None, **kwargs: Any) -> None:
        self._sampled = batch_sampler is not None
        if self._sampled:
            if batch_size != 1 or shuffle:
                raise Error("`batch_sampler` option is mutually exclusive with batch_size, shuffle.")
            batch_size = getattr(batch_sampler, "batch_size", batch_size)
        options._freeze()  # as PopTorch does: the loader's batches follow these options
        self._options = options
        self.mode = DataLoaderMode(mode)
        self._num_batches_to_combine = (options.device_iterations * options.replication_factor
                                        * options.Training.gradient_accumulation)
        # batch_size=None: torch's unbatched loading, one sample at a time (no combined batch)
        self._combined_batch_size = None if batch_size is None else int(batch_size) * self._num_batches_to_combine
        self._drop_last = drop_last
        # PopTorch rebatches in AsyncRebatched mode, and in Async mode when a short last batch must be kept
        self._rebatch = not self._sampled and batch_size is not None and (
            self.mode == DataLoaderMode.AsyncRebatched or (
                self.mode == DataLoaderMode.Async and not drop_last and self._combined_batch_size > 1))
        loaded = self._combined_batch_size
        if self._rebatch and rebatched_worker_size is not None:
            if rebatched_worker_size > self._combined_batch_size:
                raise Error(f"The rebatched_worker_size ({rebatched_worker_size}) must be <= to the combined batch "
                            f"size ({self._combined_batch_size})")
            loaded = int(rebatched_worker_size)
        if not isinstance(dataset, torch.utils.data.IterableDataset) and not drop_last and not self._sampled \
                and batch_size is not None:
            n = len(dataset)
            if n % self._combined_batch_size:
                log.warning("The number of elements in the dataset (%d) is not divisible by the number of elements "
                            "processed per step (%d) and drop_last=False. The last tensor will have a batch size of "
                            "%d. To avoid having to handle this special case switch to drop_last=True", n,
                            self._combined_batch_size, n % self._combined_batch_size)
        self._share = None
        if options.Distributed.numProcesses > 1 and auto_distributed_partitioning and batch_size is not None and \
                not isinstance(dataset, torch.utils.data.IterableDataset):
            from ipuexp.poptorch.distributed import ProcessShare

            dataset = self._share = ProcessShare(dataset, options, self._combined_batch_size, drop_last)
            if shuffle:  # the share shuffles the whole dataset itself, the same way in every process
                shuffle = False
            else:
                self._share = None
        if persistent_workers is None:
            persistent_workers = num_workers > 0
        if self._sampled:
            super().__init__(dataset, batch_sampler=batch_sampler, num_workers=num_workers,
                             persistent_workers=persistent_workers, **kwargs)
        else:
            super().__init__(dataset, batch_size=loaded, shuffle=bool(shuffle), num_workers=num_workers,
                             drop_last=drop_last and not self._rebatch and batch_size is not None,
                             persistent_workers=persistent_workers,
                             **kwargs)

    def __iter__(self) -> Any:
        if self._share is not None:  # shuffling: a new global order each epoch
            self._share.next_epoch()
        batches = super().__iter__()
        if self._sampled and self._num_batches_to_combine != 1:
            return combined_batches(batches, self._num_batches_to_combine, self._drop_last)
        if self._rebatch:
            return rebatched(batches, self._combined_batch_size, self._drop_last)
        return batches

    def __len__(self) -> int:
        if self._sampled:
            whole, rest = divmod(len(self.batch_sampler), self._num_batches_to_combine)
        elif self._rebatch:
            whole, rest = divmod(len(self.dataset), self._combined_batch_size)
        else:
            return super().__len__()
        return whole + int(bool(rest) and not self._drop_last)

    @property
    def combinedBatchSize(self) -> int:
        return self._combined_batch_size

    @property
    def options(self) -> Any:
        return self._options

    def terminate(self) -> None:
        """Stop the workers of an asynchronous loader (nothing to stop here)."""


class AsynchronousDataAccessor:
    """Iterates over ``dataset`` (a DataLoader) as PopTorch's asynchronous accessor does, in this process."""

    def __init__(self, dataset: Any, buffer_size: int = 3, miss_sleep_time_in_ms: float = 0.1,
                 load_indefinitely: bool = True, early_preload: bool = False, sharing_strategy: Any = None,
                 rebatched_size: Optional[int] = None) -> None:
        self._dataset = dataset

    def __len__(self) -> int:
        return len(self._dataset)

    def __iter__(self) -> Any:
        return iter(self._dataset)

    def terminate(self) -> None:
        """Nothing runs in the background."""
