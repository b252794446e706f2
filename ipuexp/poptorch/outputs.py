"""What a PopTorch call returns for its output mode: the outputs of every micro-batch of the call, laid out as
[device iteration][replica][micro-batch], combined as PopTorch's anchors combine them."""
from __future__ import annotations

from typing import Any, List

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from ipuexp.poptorch.enums import OutputMode


def combine(outputs: List[List[List[Any]]], mode: OutputMode) -> Any:
    """What PopTorch returns: every micro-batch's outputs concatenated (All; scalars stacked), the last
    micro-batch's of each replica (Final), or their sum over the call per replica (Sum); a scalar output of one
    replica stays a scalar under Final and Sum, the replicas' scalars are stacked."""
    if mode == OutputMode.All:
        picked = [o for per_iteration in outputs for per_replica in per_iteration for o in per_replica]
    elif mode == OutputMode.Final:
        picked = [per_replica[-1] for per_replica in outputs[-1]]
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
        if isinstance(values[0], torch.Tensor) and values[0].dim() == 0 and mode != OutputMode.All and len(values) == 1:
            joined.append(values[0])  # one replica's scalar (Final, Sum): PopTorch returns it as it is
        elif isinstance(values[0], torch.Tensor):
            joined.append(torch.stack(values) if values[0].dim() == 0 else torch.cat(values))
        else:
            joined.append(values[-1])
    return tree_unflatten(joined, spec)
