"""The capture's splitter: a torch function mode that puts every op into the block the annotations made current, and
cuts the tensors one block reads from another (the reading block gets a leaf of its own), with one op recorder and
one saved-tensor account per block (``ipuexp.graph``'s own)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakIdKeyDictionary

from ipuexp.graph.capture import _SavedTensors
from ipuexp.graph.recorder import OpRecorder
from ipuexp.graph.types import OpRecord


@dataclass
class BlockRun:
    name: str
    ipu_id: Optional[int]
    recorder: OpRecorder
    saved: _SavedTensors
    inputs: List[torch.Tensor] = field(default_factory=list)
    outputs: List[torch.Tensor] = field(default_factory=list)
    travelling: List[torch.Tensor] = field(default_factory=list)
    parameters: int = 0
    parameter_tensors: int = 0
    largest_parameter: int = 0
    tied: int = 0
    fwd: List[OpRecord] = field(default_factory=list)
    op_count_fwd: int = 0
    peak: int = 0


class Splitter(TorchFunctionMode):
    """Puts every op into the current block and cuts tensors at block boundaries."""

    def __init__(self, params: Dict[int, torch.Tensor], inputs: List[torch.Tensor], exclude: set) -> None:
        super().__init__()
        self.params = params
        self.inputs = {id(t): t for t in inputs}
        self.exclude = exclude
        self.blocks: Dict[str, BlockRun] = {}
        self.current: Optional[BlockRun] = None
        self.open: List[BlockRun] = []
        self.producer = WeakIdKeyDictionary()
        self.cut: Dict[Tuple[int, str], torch.Tensor] = {}
        self.owner: Dict[int, str] = {}
        self.auto_id = 0
        self.keep: List[torch.Tensor] = []
        self.renamed: Dict[str, str] = {}
        """The ops before the first block joined it: their producer's name "" is now the block's."""

    # ---- the annotations (BlockListener) ---------------------------------------------------------------------
    def begin(self, user_id: Optional[str], ipu_id: Optional[int], scoped: bool = False) -> None:
        if user_id is None:
            user_id = str(self.auto_id)
            self.auto_id += 1
        self._switch(str(user_id), ipu_id)
        if scoped:
            self.open.append(self.current)

    def end(self) -> None:
        """A ``with Block`` ends: its ops are done; what follows runs in the enclosing open block, if any, else
        stays where it is."""
        if self.open:
            self.open.pop()
        if self.open and self.open[-1] is not self.current:
            self._switch(self.open[-1].name, self.open[-1].ipu_id)

    def reset_auto_id(self) -> None:
        self.auto_id = 0

    def _switch(self, name: str, ipu_id: Optional[int]) -> None:
        if self.current is not None and self.current.name == name:
            return
        if self.current is not None:
            self.current.recorder.__exit__(None, None, None)
        run = self.blocks.get(name)
        if run is None and self.current is not None and self.current.name == "":
            run = self.current  # ops before the first block join it
            del self.blocks[""]
            run.name, run.ipu_id = name, ipu_id
            self.blocks[name] = run
            self.renamed[""] = name
        elif run is None:
            recorder = OpRecorder(self.exclude)
            recorder.start("fwd", [])
            run = self.blocks[name] = BlockRun(name, ipu_id, recorder, _SavedTensors(self.exclude))
        self.current = run
        run.recorder.__enter__()

    def start(self) -> None:
        self._switch("", None)

    def finish(self) -> None:
        if self.current is not None:
            self.current.recorder.__exit__(None, None, None)
        if "" in self.blocks:  # a model without annotations is one block
            run = self.blocks.pop("")
            run.name = "model"
            self.blocks[run.name] = run

    # ---- every torch function --------------------------------------------------------------------------------
    def __torch_function__(self, func: Any, types_: Any, args: Tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        run = self.current
        if run is None:
            return func(*args, **kwargs)
        args, kwargs = tree_map(lambda v: self._receive(v, run), (args, kwargs))
        if func is F.dropout:  # one op with a mask, as PopTorch runs it on the IPU
            func, args, kwargs = _native_dropout, (args, kwargs), {}
        out = func(*args, **kwargs)
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t not in self.producer:
                self.producer[t] = run.name
        return out

    def _receive(self, value: Any, run: BlockRun) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        key = id(value)
        if key in self.params:
            self._own(value, run)
            return value
        if key in self.inputs:
            if not any(t is value for t in run.inputs):
                run.inputs.append(value)
                run.recorder._add_live(value)
                run.recorder._update_peak()
            return value
        source = self.producer.get(value)
        source = self.renamed.get(source, source) if source is not None else None
        if source is None or source == run.name:
            return value
        cut = self.cut.get((key, run.name))
        if cut is None:
            cut = value.detach()
            if value.is_floating_point() and value.requires_grad:
                cut.requires_grad_(True)
            self.cut[(key, run.name)] = cut
            self.keep.append(value)
            self.producer[cut] = run.name
            run.inputs.append(cut)
            sender = self.blocks[source]
            if not any(t is value for t in sender.outputs):
                sender.outputs.append(value)
            run.recorder._add_live(cut)
            run.recorder._update_peak()
        return cut

    def _own(self, param: torch.Tensor, run: BlockRun) -> None:
        owner = self.owner.get(id(param))
        if owner is None:
            self.owner[id(param)] = run.name
            run.parameters += param.numel()
            run.parameter_tensors += 1
            run.largest_parameter = max(run.largest_parameter, param.numel())
        elif owner != run.name and (id(param), run.name) not in self.cut:
            self.cut[(id(param), run.name)] = param
            run.tied += param.numel()

    def pack(self, t: torch.Tensor) -> Any:
        if self.current is not None:
            self.current.saved.pack(t)
        return t


def _native_dropout(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """``F.dropout(input, p, training, inplace)`` as ``aten.native_dropout``."""
    bound = {**dict(zip(("input", "p", "training", "inplace"), args)), **kwargs}
    x, p, training = bound["input"], float(bound.get("p", 0.5)), bound.get("training", True)
    return torch.native_dropout(x, p, True)[0] if training and p > 0 else x
