"""A stack that runs several lists of layers one after another (LXMERT's encoder: its language layers, then its
vision layers, then its cross-modality layers), as one chain: the lists' layers in the order the stack runs them,
with a list's entry block between one list and the next.

The stack's own ``forward`` computes what a later list receives (the other stream, its masks), so an entry block
replays it: every earlier list stands aside, handing over its output (the hidden states it ended with, carried
along the chain), the stack's code between the previous list and this one is recorded, and a probe stops the
replay at this list's first layer. What the stack computed before its first list (embeddings of both streams) is
recomputed from the model's inputs, which the chain carries, without being recorded: the embeddings block has
it. The lists are found in the model: the lists of identical modules beside the longest one, in the order a run
of the stack calls them.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import torch
from torch import nn

from ipuexp.models.hf_chain import Context, _Probe, _Stop
from ipuexp.models.hf_task import StandIn, _Recording, standing_aside


def sibling_lists(backbone: nn.Module, parent: nn.Module, name: str, inputs: Dict[str, Any]) -> List[str]:
    """Names of ``parent``'s lists of identical layers, ``name``'s among them, in the order ``backbone`` runs
    them on ``inputs`` (``[name]`` when it has no others)."""
    names = [n for n, m in parent.named_children()
             if isinstance(m, nn.ModuleList) and len(m) and len({type(x) for x in m}) == 1]
    if len(names) < 2:
        return [name]
    order: List[str] = []
    hooks = [getattr(parent, n)[0].register_forward_pre_hook(lambda _m, _a, n=n: order.append(n)) for n in names]
    try:
        from ipuexp.models.hf_chain import one_sequence_per_sample

        with torch.no_grad(), one_sequence_per_sample():
            backbone(**inputs)
    except Exception:  # the stack cannot run whole here: its longest list alone
        return [name]
    finally:
        for h in hooks:
            h.remove()
    ran = list(dict.fromkeys(order))
    return ran if name in ran else [name]


class ListEntry(nn.Module):
    """The stack's forward replayed up to list ``index``'s first layer: takes the previous list's chain (hidden,
    its context, outputs of the lists before it, the model's inputs, labels) and starts this list's."""

    def __init__(self, backbone: nn.Module, lists: List[Tuple[nn.Module, str, int]], index: int,
                 input_names: List[str], call_kwargs: Dict[str, Any], before: Context, context: Context) -> None:
        super().__init__()
        self.index, self.input_names = index, list(input_names)
        self.__dict__.update(_backbone=backbone, _lists=lists, _kwargs=dict(call_kwargs), _before=before,
                             _context=context)

    def forward(self, hidden: torch.Tensor, *rest: Any) -> Tuple[Any, ...]:
        w, k = self._before.width, self.index - 1
        earlier = rest[w:w + k]
        inputs = rest[w + k:w + k + len(self.input_names)]
        after = rest[w + k:]
        recording = _Recording()
        stand_ins: List[nn.Module] = [StandIn(arity, earlier[i]) for i, (_p, _n, arity) in enumerate(self._lists[:k])]
        stand_ins.append(StandIn(self._lists[k][2], hidden, recording=recording))
        stand_ins.append(_Probe())
        try:
            with standing_aside(self._lists[:k + 2], stand_ins, recording):
                self._backbone(**dict(zip(self.input_names, inputs)), **self._kwargs)
        except _Stop as stop:
            args, kwargs = stop.args
        else:
            raise RuntimeError(f"{type(self._backbone).__name__} returned before its list {self._lists[k + 1][1]}")
        args, kwargs = list(args), dict(kwargs)
        start = args.pop(0) if args else kwargs.pop("hidden_states")
        return (start, *self._context.flatten(tuple(args), kwargs), *earlier, hidden, *after)
