"""PopTorch's checks of overlapped host IO (``set_overlap_for_input`` / ``set_overlap_for_output``), made on a
model's first call and raised as ``poptorch.Error`` with PopTorch's messages: a marked input is a model input that
nothing else reads, a marked output is returned once; overlapping IO needs ``ShardedExecution`` and IO tiles
(``TensorLocations.numIOTiles``). A mark returns an alias of its tensor, the op the ops after it read."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from ipuexp.poptorch.errors import Error

_active: List["OverlapCheck"] = []


class OverlapCheck(TorchFunctionMode):
    """Records the marks of one forward and the ops that read the model's inputs."""

    def __init__(self, inputs: List[torch.Tensor]) -> None:
        super().__init__()
        self.inputs = {id(t): i for i, t in enumerate(inputs)}
        self.keep: List[torch.Tensor] = list(inputs)  # ids stay unique while recorded
        self.read: Dict[int, int] = {}
        """Ops that read each tensor, by its id."""
        self.marks: Dict[int, Tuple[int, bool, Any]] = {}
        """alias id -> (marked tensor's id, output?, mode)."""
        self.misused: Optional[int] = None

    def __torch_function__(self, func: Any, types_: Any, args: Tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        marked = {orig for orig, output, _ in self.marks.values() if not output}
        for t in tree_flatten((args, kwargs))[0]:
            if isinstance(t, torch.Tensor):
                self.read[id(t)] = self.read.get(id(t), 0) + 1
                if id(t) in marked and id(t) in self.inputs:  # the input read past its mark
                    self.misused = self.inputs[id(t)]
        return func(*args, **(kwargs or {}))

    def mark(self, tensor: torch.Tensor, mode: Any, output: bool) -> torch.Tensor:
        if not output and id(tensor) in self.inputs and self.read.get(id(tensor)):
            self.misused = self.inputs[id(tensor)]
        with _paused(self):
            alias = tensor.view_as(tensor)
        self.keep += [tensor, alias]
        self.marks[id(alias)] = (id(tensor), output, mode)
        return alias

    def check(self, out: Any, options: Any) -> None:
        from ipuexp.poptorch.enums import OverlapMode
        from ipuexp.poptorch.strategy import ShardedExecution

        if self.misused is not None:
            raise Error("poptorch.set_overlap_for_input must be the only op applied to an input. This is not the "
                        f"case for input {self.misused} to the model.")
        returned = [id(t) for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        for alias, (orig, output, _) in self.marks.items():
            if not output and orig not in self.inputs:
                raise Error("poptorch.set_overlap_for_input applied on a node which is not a tensor input to the "
                            "model.")
            if output and alias not in returned:
                raise Error("poptorch.set_overlap_for_output applied on a node which is not a tensor output to the "
                            "model.")
            if output and (orig in returned or returned.count(alias) > 1):
                raise Error("poptorch.set_overlap_for_output cannot be used with a tensor that is returned twice. "
                            "Please check all returned tensors including those nested in tuples/lists.")
        if all(OverlapMode(mode) == OverlapMode.NoOverlap for _, _, mode in self.marks.values()):
            return
        if not isinstance(options.execution_strategy, ShardedExecution):
            raise Error("Overlapped IO is not supported with poptorch.PipelinedExecution. If you are using only one "
                        "IPU, please switch to poptorch.ShardedExecution.")
        if not options.TensorLocations.num_io_tiles:
            raise Error("No IO tiles allocated. You must allocate at least 32 IO tiles using "
                        "poptorch.Options().TensorLocations.numIOTiles.")


class _paused:
    """The check's mode off for the alias it makes itself."""

    def __init__(self, check: OverlapCheck) -> None:
        self.check = check

    def __enter__(self) -> None:
        self.saved = dict(self.check.read)

    def __exit__(self, *exc: Any) -> None:
        self.check.read = self.saved


def active() -> Optional[OverlapCheck]:
    return _active[-1] if _active else None
