"""Units of the figures ipuexp prints. Memory is counted in binary units (KiB, MiB, GiB), as PopVision and the
Poplar memory report count it (a Mk2 tile holds 624 KiB, an IPU 897 MiB); rates (FLOPs, samples/s, bandwidth)
stay decimal."""
from __future__ import annotations

from typing import Iterable, Optional

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
SCALES = {"GiB": GIB, "MiB": MIB, "KiB": KIB, "B": 1}


def unit_of(n: float) -> str:
    """The largest binary unit that keeps ``n`` bytes at 1 or more."""
    return next((unit for unit, scale in SCALES.items() if abs(n) >= scale), "B")


def column_unit(values: Iterable[float], largest: str = "GiB") -> str:
    """One unit for a column of figures, so that they read against each other: the smallest figure's, up to
    ``largest`` (an IPU's memory reads in MiB even past 1 GiB, as PopVision shows it)."""
    sizes = [abs(v) for v in values if v]
    unit = unit_of(min(sizes)) if sizes else "B"
    return unit if SCALES[unit] <= SCALES[largest] else largest


def human_bytes(n: float, digits: int = 1, unit: Optional[str] = None) -> str:
    """Bytes in ``unit``, by default the largest binary unit that keeps the figure at 1 or more: ``763.3 MiB``."""
    unit = unit or unit_of(n)
    if unit == "B":
        return f"{int(n)} B"
    return f"{n / SCALES[unit]:,.{digits}f} {unit}"
