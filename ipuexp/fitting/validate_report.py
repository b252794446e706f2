"""What ``python -m ipuexp.validate`` finds: each calibration row's predictions (in sample and held out, with the
error band of its leave-one-out prediction) and the statistics its gates and table are made of (MAPE and worst row
per mode, rows inside their band, the spread of the held-out constants).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ipuexp.calibration import Row
from ipuexp.calibration.band_ends import inside
from ipuexp.calibration.evidence import Point


@dataclass
class Outcome:
    row: Row
    predicted: float
    loo: Optional[float] = None
    held_out: Dict[str, float] = field(default_factory=dict)
    """Prediction of the row per held-out mode (leave-one-out, -family-out, -size-out)."""
    band: Optional[float] = None
    """Error band (percent) of the row's leave-one-out prediction, from the other rows' residuals."""
    point: Optional[Point] = None
    """Where the row sits along the axes its error band grows on (``calibration.reach``)."""
    unexplained: str = ""
    """Why the row is left out of the fit (a mechanism the model does not explain); empty for a fitted row. Such a row is predicted by every fit without being in it, reported, and kept out of the
    gates' statistics."""

    @property
    def error(self) -> float:
        return 100.0 * (self.predicted / self.row.published - 1.0)

    @property
    def loo_error(self) -> Optional[float]:
        return None if self.loo is None else 100.0 * (self.loo / self.row.published - 1.0)

    def mode_error(self, mode: str) -> Optional[float]:
        if mode == "in-sample":
            return self.error
        value = self.held_out.get(mode)
        return None if value is None else 100.0 * (value / self.row.published - 1.0)

    @property
    def in_band(self) -> Optional[bool]:
        # The band bounds the error this table shows, loo / published - 1 (ipuexp.calibration.band_ends).
        if self.loo is None or self.band is None:
            return None
        return inside(self.loo, self.row.published, self.band)


@dataclass
class Report:
    outcomes: List[Outcome]
    constants: Dict[str, float]
    loo_constants: Dict[str, Dict[str, float]] = field(default_factory=dict)
    held_out_constants: Dict[str, Dict[str, Dict[str, float]]] = field(default_factory=dict)
    """mode -> left-out group -> constants."""
    unpredicted: List[Tuple[Row, str]] = field(default_factory=list)
    """Rows of the table the engine cannot predict yet, with the reason (reported, not fitted)."""
    needs_extra: List[Row] = field(default_factory=list)
    """Rows of ``model.name: hf`` left out because Transformers (the hf extra) is not installed."""

    @property
    def fitted(self) -> List[Outcome]:
        """The rows the constants are fitted to, which the gates judge."""
        return [o for o in self.outcomes if not o.unexplained]

    @property
    def mape(self) -> float:
        return sum(abs(o.error) for o in self.fitted) / len(self.fitted)

    @property
    def worst(self) -> float:
        return max(abs(o.error) for o in self.fitted)

    @property
    def loo_mape(self) -> Optional[float]:
        errs = [o.loo_error for o in self.fitted if o.loo_error is not None]
        return sum(abs(e) for e in errs) / len(errs) if errs else None

    def mode_errors(self, mode: str) -> List[float]:
        return [e for e in (o.mode_error(mode) for o in self.fitted) if e is not None]

    def mode_mape(self, mode: str) -> Optional[float]:
        errs = self.mode_errors(mode)
        return sum(abs(e) for e in errs) / len(errs) if errs else None

    def mode_worst(self, mode: str) -> Optional[float]:
        errs = self.mode_errors(mode)
        return max(abs(e) for e in errs) if errs else None

    @property
    def covered(self) -> int:
        """Rows whose published value lies inside the band of their leave-one-out prediction."""
        return sum(1 for o in self.fitted if o.in_band)

    @property
    def covered_all(self) -> int:
        """Rows, the unexplained ones included, whose published value lies inside their leave-one-out band."""
        return sum(1 for o in self.outcomes if o.in_band)

    @property
    def out_of_band(self) -> int:
        """Rows, the unexplained ones included, whose published value lies outside their leave-one-out band."""
        return sum(1 for o in self.outcomes if o.in_band is False)

    def constant_range(self, name: str) -> Optional[Tuple[float, float]]:
        values = [c[name] for c in self.loo_constants.values() if name in c]
        return (min(values), max(values)) if values else None
