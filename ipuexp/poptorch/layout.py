"""A PopTorch call's layout: its batch split into micro-batches as [device iteration][replica][micro-batch], and
their outputs combined as PopTorch's anchors combine them for the output mode; a call's batch size, its model's
precision and its script's name."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from ipuexp.poptorch.enums import OutputMode


def batches_per_call(options: Any, training: bool) -> int:
    """Micro-batches per call: device iterations x replicas x gradient accumulation (training)."""
    ga = options.Training.gradient_accumulation if training else 1
    return options.device_iterations * options.replication_factor * ga


def call_layout(options: Any, training: bool, micro_batch_size: int, batch: int) -> Tuple[int, int, int, int]:
    """(device iterations, replicas, accumulation, micro-batch size) of a call of ``batch`` samples. An inference
    call may be shorter than the compiled one by whole device iterations (a DataLoader's last batch with
    drop_last=False)."""
    o = options
    ga = o.Training.gradient_accumulation if training else 1
    replicas = o.replication_factor
    per_call = batches_per_call(options, training)
    if batch == 0:  # no batched input (a model of buffers alone): every micro-batch reads the same inputs
        return o.device_iterations, replicas, ga, 0
    if batch % per_call == 0:
        return o.device_iterations, replicas, ga, batch // per_call
    mbs = micro_batch_size
    if not training and mbs and batch % (replicas * mbs) == 0:
        return batch // (replicas * mbs), replicas, ga, mbs
    raise ValueError(f"the model was called with a batch of {batch} samples, not a multiple of device iterations "
                     f"x replicas x gradient accumulation ({per_call} micro-batches)"
                     + (f" of {mbs} samples" if mbs else ""))


def micro_batches(args: Any, kwargs: Any, layout: Tuple[int, int, int, int]) -> List[Any]:
    """(args, kwargs) of each micro-batch of a call laid out as (device iterations, replicas, accumulation,
    micro-batch size); a micro-batch size of 0 (no batched input): every micro-batch reads the call's inputs."""
    iterations, replicas, ga, mbs = layout

    def part(t: Any, d: int, r: int, m: int) -> Any:
        if not isinstance(t, torch.Tensor) or t.dim() == 0 or not mbs:
            return t
        start = ((d * replicas + r) * ga + m) * mbs
        return t[start:start + mbs]

    return [[[tree_map(lambda t: part(t, d, r, m), (args, kwargs)) for m in range(ga)] for r in range(replicas)]
            for d in range(iterations)]


def combine(outputs: List[List[List[Any]]], mode: OutputMode, options: Any = None) -> Any:
    """What PopTorch returns: every micro-batch's outputs concatenated (All; scalars stacked), the last
    micro-batch's of each replica (Final), the same of every ``options.output_return_period``-th device
    iteration (EveryN), or their sum over the call per replica (Sum); a scalar output returned once (one replica
    under Final and Sum, one micro-batch under All) stays a scalar, several are stacked."""
    if mode == OutputMode.All:
        picked = [o for per_iteration in outputs for per_replica in per_iteration for o in per_replica]
    elif mode == OutputMode.Final:
        picked = [per_replica[-1] for per_replica in outputs[-1]]
    elif mode == OutputMode.EveryN:
        period = options.output_return_period
        if period > len(outputs) or len(outputs) % period:  # PopART's DataFlow::isValidAnchorReturnPeriod
            from ipuexp.poptorch.errors import Error

            raise Error("Return period must be <= to the number of batches per step" if period > len(outputs) else
                        "Return period must be a factor of the number of batches per step")
        picked = [per_replica[-1] for per_iteration in outputs[period - 1::period] for per_replica in per_iteration]
    else:
        replicas = len(outputs[0])
        flat_all = [[tree_flatten(o)[0] for per_iteration in outputs for o in per_iteration[r]]
                    for r in range(replicas)]
        picked = [tree_unflatten([sum(vals[1:], vals[0]) for vals in zip(*per_r)], tree_flatten(outputs[0][0][0])[1])
                  for per_r in flat_all]
    leaves = [tree_flatten(o)[0] for o in picked]
    spec = tree_flatten(picked[0])[1]
    joined = []
    for values in zip(*leaves):
        if isinstance(values[0], torch.Tensor) and values[0].dim() == 0 and len(values) == 1:
            joined.append(values[0])  # one scalar returned (one replica, or a call of one micro-batch): as it is
        elif isinstance(values[0], torch.Tensor):
            joined.append(torch.stack(values) if values[0].dim() == 0 else torch.cat(values))
        else:
            joined.append(values[-1])
    # The IPU has no 64-bit integers: PopTorch returns int64 outputs as int32 (its random_sampling_test's randint).
    joined = [t.to(torch.int32) if isinstance(t, torch.Tensor) and t.dtype == torch.int64 else t for t in joined]
    return tree_unflatten(joined, spec)


def first_dim(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> int:
    """The batch of a call: its first batched tensor's first dimension, 0 without one."""
    return next((int(t.shape[0]) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor) and t.dim()),
                0)


def script_name() -> str:
    """The running script's name (the MLflow experiment of its runs): ``train`` for ``python train.py`` or
    ``python -m pkg.train``, the package's for ``python -m trainer`` (its ``__main__.py``)."""
    import sys
    from pathlib import Path

    if not sys.argv or not sys.argv[0] or sys.argv[0] == "-c":
        return "poptorch"
    path = Path(sys.argv[0])
    return (path.parent.name or "poptorch") if path.stem == "__main__" else path.stem


def precision_of(model: torch.nn.Module) -> str:
    """``options.precision`` of the model's weights: 16.16 for a ``.half()`` model, 32.32 for float."""
    dtypes = {p.dtype for p in model.parameters() if p.is_floating_point()}
    return "16.16" if dtypes == {torch.float16} else "32.32"
