"""How ``poptorch.DataLoader`` assembles its combined batches when torch's loader does not hand them over whole:
the batches of a user's ``batch_sampler`` joined ``num_batches_to_combine`` at a time, and the batches of
``DataLoaderMode.AsyncRebatched`` (each worker's batch of ``rebatched_worker_size`` samples) cut again into combined
batches, across the workers' boundaries. A batch of a custom type is flattened and rebuilt by its registered
``ICustomArgParser`` (through torch's pytree)."""
from __future__ import annotations

from typing import Any, Iterable, Iterator, List

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten


def _join(batches: List[Any]) -> Any:
    """One batch from ``batches`` (same structure): each tensor concatenated along dimension 0."""
    leaves = [tree_flatten(b) for b in batches]
    spec = leaves[-1][1]
    joined = [torch.cat(parts) if isinstance(parts[0], torch.Tensor) else parts[-1]
              for parts in zip(*(values for values, _ in leaves))]
    return tree_unflatten(joined, spec)


def combined_batches(batches: Iterable[Any], count: int, drop_last: bool) -> Iterator[Any]:
    """Every ``count`` consecutive ``batches`` as one; an incomplete last group is kept unless ``drop_last``."""
    group: List[Any] = []
    for batch in batches:
        group.append(batch)
        if len(group) == count:
            yield _join(group)
            group = []
    if group and not drop_last:
        yield _join(group)


def _size(batch: Any) -> int:
    return next(int(t.shape[0]) for t in tree_flatten(batch)[0] if isinstance(t, torch.Tensor))


def _slice(batch: Any, start: int, stop: int) -> Any:
    values, spec = tree_flatten(batch)
    return tree_unflatten([v[start:stop] if isinstance(v, torch.Tensor) else v for v in values], spec)


def rebatched(batches: Iterable[Any], size: int, drop_last: bool) -> Iterator[Any]:
    """The samples of ``batches`` (any sizes) in batches of exactly ``size``; a shorter last one unless
    ``drop_last``."""
    pending: List[Any] = []
    held = 0
    for batch in batches:
        pending.append(batch)
        held += _size(batch)
        while held >= size:
            joined = _join(pending) if len(pending) > 1 else pending[0]
            yield _slice(joined, 0, size)
            held -= size
            pending = [_slice(joined, size, size + held)] if held else []
    if pending and not drop_last:
        yield _join(pending) if len(pending) > 1 else pending[0]
