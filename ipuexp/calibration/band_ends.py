"""What an error band says about a measured throughput, in one place for every command that compares the two.

A band bounds the prediction's error, ``predicted / measured - 1``, either way: the statistic the bands are made of
(each is a multiple of leave-one-out residuals of that form, ``ipuexp.calibration.band``) and the one that
``python -m ipuexp.validate`` reports (ViT-B/16: +44%, the engine optimistic). A measurement therefore lies inside
a band ``b`` when it is between ``predicted / (1 + b)`` and ``predicted / (1 - b)``: a ±10% band reaches from 909 to
1,111 samples/s around 1,000, nearly ``1,000 x (1 -+ 10%)``; a ±108% band reaches down to 48% of the prediction and
up without bound, since a prediction cannot be more than 100% too low. So the lower end stays positive for any
band (what the planner ranks by), and the upper end exists below 100%.
"""
from __future__ import annotations

from typing import Optional, Tuple

EDGE = 1e-9
"""Percent points of slack at the edge: 1,100 measured against 1,000 ±10% is inside whatever the rounding."""


def error_pct(predicted: float, measured: float) -> float:
    """The prediction's error in percent, ``100 (predicted / measured - 1)``: positive when it promised too much."""
    return 100.0 * (predicted / measured - 1.0)


def inside(predicted: float, measured: float, band_pct: float) -> bool:
    """Whether the measurement lies within the prediction's band, its edge included."""
    return abs(error_pct(predicted, measured)) <= band_pct + EDGE


def band_ends(predicted: float, band_pct: float) -> Tuple[float, Optional[float]]:
    """The lowest and highest measurement inside the band; the highest None for a band of 100% or more."""
    band = band_pct / 100.0
    return predicted / (1.0 + band), (predicted / (1.0 - band) if band < 1.0 else None)
