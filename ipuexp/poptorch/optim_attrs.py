"""What PopTorch checks each time a model takes an optimizer (compile, ``setOptimizer``): attributes it does not
know, once recorded at the first use, are warned about once each (logged at debug level under
``Options.relaxOptimizerAttributesChecks``): the device runs PopART's optimizer, which never sees them. And an
optimizer whose gradient accumulators are fp16 (``accum_type=torch.half``, separate accumulators) needs the running
mean reduction: set at compile, an error once the model is compiled with another."""
from __future__ import annotations

from typing import Any, Dict, List

import torch

from ipuexp.poptorch.enums import MeanReductionStrategy
from ipuexp.poptorch.logs import log

_OWN = ("defaults", "state", "param_groups", "variable_attrs", "poptorch_args")


class AttributeTracker:
    """The optimizer and group attributes a model has seen (PopTorch's per-model tracker)."""

    def __init__(self, relaxed: bool) -> None:
        self.relaxed = relaxed
        self.seen: Dict[str, List[str]] = {"optimizer attribute": [], "group": [], "default group variable": []}
        self.recording = True
        self.said: List[str] = []

    def _check(self, kind: str, label: str, names: List[str], optimizer: Any) -> None:
        seen = self.seen[kind]
        extra = [n for n in names if n not in seen]
        if self.recording:
            seen.extend(extra)
        elif extra:
            line = f"Ignoring unexpected {label} in {type(optimizer).__name__} optimizer: {extra}"
            if line not in self.said:
                self.said.append(line)
                (log.debug if self.relaxed else log.warning)(line)

    def check(self, optimizer: Any) -> None:
        self._check("default group variable", "default group variable", list(optimizer.defaults), optimizer)
        own = [k for k in vars(optimizer) if k not in _OWN and not k.startswith("_")]
        self._check("optimizer attribute", "optimizer attribute", own, optimizer)
        for i, group in enumerate(optimizer.param_groups):
            self._check("group", f"group {i} attribute", [k for k in group if k != "params"], optimizer)
        self.recording = False


def reduction_for(optimizer: Any, options: Any, compiling: bool) -> None:
    """fp16 separate gradient accumulators take the running mean reduction (PopTorch sets it at compile)."""
    args = getattr(optimizer, "poptorch_args", {})
    if args.get("accum_type") != torch.float16 or args.get("use_combined_accum"):
        return
    training = options.Training
    if compiling:
        training.__dict__["meanAccumulationAndReplicationReductionStrategy"] = MeanReductionStrategy.Running
    elif training.meanAccumulationAndReplicationReductionStrategy != MeanReductionStrategy.Running:
        raise ValueError("Invalid optimizer: the new optimizer would require changing options.Training."
                         "meanAccumulationAndReplicationReductionStrategy to poptorch.MeanReductionStrategy.Running "
                         "but the executable is already compiled.")
