"""ipuexp: declarative experiment orchestration for Graphcore IPU training on a multi-IPU emulator.

``ipuexp.Block`` and ``ipuexp.PipelinedModel`` describe a user's own model as pipeline blocks; they are loaded
on first use so that ``import ipuexp`` (and the command line's start) does not import torch.
"""
from __future__ import annotations

import logging
from typing import Any

# matplotlib logs "generated new fontManager" (INFO) the first time it runs for a user, which the job's logging
# shows: not news about the run. Its warnings still show.
logging.getLogger("matplotlib.font_manager").setLevel(logging.WARNING)

__all__ = ["Block", "PipelinedModel", "InputSpec"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ipuexp.models import blocks

        return getattr(blocks, name)
    raise AttributeError(f"module 'ipuexp' has no attribute {name!r}")
