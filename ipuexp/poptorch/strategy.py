"""Execution strategies: ``Stage``, ``PipelinedExecution`` and ``ShardedExecution`` (PopTorch's names), which group
blocks into stages and stages onto IPUs; the phased strategies are named as unsupported."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ipuexp.poptorch.enums import AutoStage
from ipuexp.poptorch.errors import UnsupportedError


class Stage:
    """One or more blocks on one IPU."""

    def __init__(self, *block_ids: str) -> None:
        if not all(isinstance(b, str) for b in block_ids):
            raise TypeError(f"Block IDs are supposed to be strings but got {block_ids}")
        self._blocks = tuple(block_ids)
        self._ipu: Optional[int] = None

    @property
    def blocks(self) -> List[str]:
        return list(self._blocks)

    def ipu(self, ipu: int) -> "Stage":
        """Run this stage on IPU ``ipu``."""
        self._ipu = int(ipu)
        return self

    def __repr__(self) -> str:
        return f"Stage({', '.join(map(repr, self._blocks))})" + (f".ipu({self._ipu})" if self._ipu is not None else "")


class PipelinedExecution:
    """Stages run as a pipeline: each argument is a Stage, a block ID or a list of block IDs, in stage order; with no
    stages (or an ``AutoStage``), each block is a stage: on its ``ipu_id`` (SameAsIpu) or in order (AutoIncrement)."""

    schedule = "grouped"
    """ipuexp's ``options.pipeline.schedule`` for this strategy."""

    def __init__(self, *args: Any) -> None:
        self.auto_stage = AutoStage.SameAsIpu
        self.stages: List[Stage] = []
        if len(args) == 1 and isinstance(args[0], AutoStage):
            self.auto_stage = args[0]
            return
        for arg in args:
            if isinstance(arg, Stage):
                stage = arg
            elif isinstance(arg, str):
                stage = Stage(arg)
            else:
                stage = Stage(*arg)
            self.stages.append(stage)
        seen: Dict[str, int] = {}
        for i, stage in enumerate(self.stages):
            for block in stage.blocks:
                if block in seen:
                    raise ValueError(f"{block} associated with more than one stage")
                seen[block] = i

    def stage_of(self, block_id: str) -> Optional[int]:
        """The index of the explicit stage holding ``block_id``, None without explicit stages."""
        for i, stage in enumerate(self.stages):
            if block_id in stage.blocks:
                return i
        if self.stages:
            raise ValueError(f"Unknown Block '{block_id}' list of expected Blocks: "
                             f"{[b for s in self.stages for b in s.blocks]}")
        return None

    def stage(self, block_id: str) -> Stage:
        index = self.stage_of(block_id)
        return self.stages[index] if index is not None else Stage(block_id)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(repr, self.stages)) or self.auto_stage.name})"


class ShardedExecution(PipelinedExecution):
    """Stages run one after the other, one micro-batch at a time (ipuexp's ``sequential`` schedule)."""

    schedule = "sequential"


def _phased(name: str) -> type:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedError(f"poptorch.{name}", "PipelinedExecution, ShardedExecution")

    return type(name, (), {"__init__": __init__, "__doc__": f"PopTorch's {name}: not supported by ipuexp."})


ParallelPhasedExecution = _phased("ParallelPhasedExecution")
SerialPhasedExecution = _phased("SerialPhasedExecution")
