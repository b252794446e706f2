"""The settings of ``python -m ipuexp.validate`` (``ipuexp/calibration/validate.yaml``), in a module of their own:
OmegaConf reads a structured config's annotations from the module that defines it, which must be importable by
name (the command itself runs as ``__main__``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from ipuexp.calibration import CALIBRATION_DIR


@dataclass
class ValidateConfig:
    """Settings of the validation command (``ipuexp/calibration/validate.yaml``)."""

    csv: Optional[str] = None
    """Calibration table (default: the one shipped with ipuexp); a relative path is taken from the current
    directory."""
    mape_threshold: float = 10.0
    """Exit 1 when the mean absolute percentage error exceeds this (percent)."""
    max_row_error: float = 20.0
    """Exit 1 when any row's absolute error exceeds this (percent)."""
    leave_one_out: bool = True
    """Also refit without each row, each family and each system size, and predict what was left out."""
    exclude: List[str] = field(default_factory=list)
    """Row ids left out of the table altogether (a what-if study: the fit and every statistic without them)."""
    unexplained: Dict[str, str] = field(default_factory=dict)
    """Row id -> why: rows whose error comes from a mechanism the model does not explain. They are predicted by
    every fit without being in any, reported with their error, and kept out of the fit and the gates, so that one
    unexplained row neither pulls the constants nor hides behind a robust loss."""
    loo_mape_threshold: float = 8.0
    """Exit 1 when the leave-one-out MAPE exceeds this (percent)."""
    loo_worst: float = 20.0
    """Exit 1 when any row's leave-one-out error exceeds this (percent)."""
    held_out_worst: float = 25.0
    """Exit 1 when any row's leave-one-family-out or -size-out error exceeds this (percent)."""
    max_out_of_band: int = 1
    """Exit 1 when more rows than this, the unexplained ones included, have their published value outside the band
    of their leave-one-out prediction."""
    cache_dir: Optional[str] = None
    """Graph capture cache (default: the engine's)."""


def load_config(path: Optional[Path] = None) -> ValidateConfig:
    from omegaconf import OmegaConf

    base = OmegaConf.structured(ValidateConfig)
    path = path or CALIBRATION_DIR / "validate.yaml"
    if path.exists():
        base = OmegaConf.merge(base, OmegaConf.load(path))
    return OmegaConf.to_object(base)
