"""``poptorch._impl``, the one function of it that PopTorch's test helpers read: ipuexp never traces a model on an
"ipu" device (the model runs on CPU tensors), so a tensor a model creates stays on the CPU."""
from __future__ import annotations


def isDispatchTracing() -> bool:
    return False
