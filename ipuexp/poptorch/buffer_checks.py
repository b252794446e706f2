"""PopTorch's checks of a model's buffers and parameters, raised at its first call as ``poptorch.Error`` with
PopTorch's messages: a forward that removes one or assigns a new tensor to one (PopTorch binds each to its device
tensor when it compiles; ``self.y.copy_(src)`` updates it in place), and a training model that updates a buffer in
place on several replicas while PopTorch would broadcast the buffers (``Options.broadcastBuffers``, True unless set
False), which PopTorch cannot do. BatchNorm's running statistics are exempt, as in PopTorch: its own op keeps them."""
from __future__ import annotations

from typing import Any, Dict, Tuple

import torch

from ipuexp.poptorch.errors import Error

_KEEPS_OWN = (torch.nn.modules.batchnorm._BatchNorm,)
"""Modules whose buffers change by their own op (PopTorch's ``BUFFERS_CAN_CHANGE``: the BatchNorms)."""


def tensors(model: torch.nn.Module) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
    """(buffers, parameters) by qualified name, the BatchNorms' buffers left out."""
    buffers = {name: b for module_name, m in model.named_modules() if not isinstance(m, _KEEPS_OWN)
               for name, b in m.named_buffers(prefix=module_name, recurse=False)}
    return buffers, dict(model.named_parameters())


def check_bindings(before: Tuple[Dict[str, torch.Tensor], ...], model: torch.nn.Module) -> None:
    """Each buffer and parameter ``before`` the forward is still there and still the same tensor."""
    for kind, old, new in zip(("Buffer", "Parameter"), before, tensors(model)):
        for name, tensor in old.items():
            if name not in new:
                raise Error(f"{kind} {name} is removed from the model when calling the forward method.")
            if new[name] is not tensor:
                raise Error(f"{kind} {name} is reassigned within the model when calling the forward method. This is "
                            f"not supported. Consider using self.{name}.copy_(src) to copy data from a source tensor, "
                            "where src is the name of the source tensor.")


def check_broadcast(values: Dict[str, torch.Tensor], model: torch.nn.Module, options: Any, training: bool) -> None:
    """No buffer changed by the forward (``values``: theirs before it) on a replicated training model that
    broadcasts its buffers."""
    if not training or options.replication_factor == 1 or options.calls.get("broadcastBuffers", True) is False:
        return
    buffers = tensors(model)[0]
    if any(name in buffers and not torch.equal(buffers[name], v) for name, v in values.items()):
        raise Error("PopTorch does not support broadcasting buffers. If your model is able to tolerate buffers "
                    "becoming out of sync between replicas, you can disable buffer broadcasting using "
                    "poptorch.Options.broadcastBuffers(False).")
