"""The evidence an error band rests on: each calibration row's leave-one-out residual, and where the row sits along
the axes that move the model's error (``Point``), as ``python -m ipuexp.validate --fit --write`` writes them to
``residuals.csv`` (and ``python -m ipuexp.calibrate`` into a calibration file)."""
from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

from ipuexp.calibration import CALIBRATION_DIR, Row
from ipuexp.files import whole

RESIDUALS = CALIBRATION_DIR / "residuals.csv"
RESIDUAL_FIELDS = ("id", "family", "ipu", "ipus", "micro_batch", "grad_accum", "loo_error_pct", "fitted",
                   "ipus_per_replica", "elements", "elements_kind", "samples_per_step", "tile_headroom", "framework",
                   "lofo_error_pct")


@dataclass(frozen=True)
class Point:
    """Where a configuration sits along the axes that move the model's error (0 or "": not known, not compared)."""

    ipus_per_replica: int = 0
    elements: float = 0.0
    """Tokens (sequence models) or pixels (image models) per micro-batch."""
    elements_kind: str = ""
    """tokens or pixels."""
    samples_per_step: float = 0.0
    """Samples per weight update over all replicas (packs for packed data)."""
    tile_headroom: Optional[float] = None
    """Share of the fullest tile's memory left."""
    system_ipus: int = 0
    """IPUs in use: replicas x IPUs per replica."""
    framework: str = ""
    """``host.framework``: the loop whose host call the step pays."""


@dataclass(frozen=True)
class Residual:
    id: str
    family: str
    ipu: str
    ipus: int
    micro_batch: int
    grad_accum: int
    loo_error_pct: float
    fitted: bool = True
    """False for a row the model does not explain (``validate.yaml`` unexplained): predicted by every fit, in none."""
    ipus_per_replica: int = 0
    elements: float = 0.0
    elements_kind: str = ""
    samples_per_step: float = 0.0
    tile_headroom: Optional[float] = None
    framework: str = ""
    lofo_error_pct: Optional[float] = None
    """The row's error with the constants refitted without its whole family (how far off a family the fit never
    saw is): the band of a model family with no row of its own; None where not computed."""

    @cached_property
    def point(self) -> Point:
        return Point(self.ipus_per_replica, self.elements, self.elements_kind, self.samples_per_step,
                     self.tile_headroom, self.ipus, self.framework)


def write_residuals(rows: Sequence[Residual], path: Path = RESIDUALS) -> None:
    with whole(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(RESIDUAL_FIELDS)
        for r in rows:
            w.writerow([r.id, r.family, r.ipu, r.ipus, r.micro_batch, r.grad_accum, f"{r.loo_error_pct:.2f}",
                        "yes" if r.fitted else "no", r.ipus_per_replica, f"{r.elements:g}", r.elements_kind,
                        f"{r.samples_per_step:g}", "" if r.tile_headroom is None else f"{r.tile_headroom:.4f}",
                        r.framework, "" if r.lofo_error_pct is None else f"{r.lofo_error_pct:.2f}"])
    load_residuals.cache_clear()


@lru_cache(maxsize=4)
def load_residuals(path: Path = RESIDUALS) -> Tuple[Residual, ...]:
    if not path.exists():
        return ()
    with open(path, newline="") as f:
        return tuple(residual_from(r) for r in csv.DictReader(f))


def residual_from(r: Dict[str, Any]) -> Residual:
    """A residual from its fields (a row of ``residuals.csv`` or of a calibration file); the reach fields are
    optional (a file written before them has none: those axes are not compared)."""
    headroom, lofo = r.get("tile_headroom"), r.get("lofo_error_pct")
    return Residual(str(r["id"]), str(r["family"]), str(r["ipu"]), int(r["ipus"]), int(r["micro_batch"]),
                    int(r["grad_accum"]), float(r["loo_error_pct"]),
                    str(r.get("fitted", "yes")).lower() not in ("no", "false", "0"),
                    int(float(r.get("ipus_per_replica") or 0)), float(r.get("elements") or 0.0),
                    str(r.get("elements_kind") or ""), float(r.get("samples_per_step") or 0.0),
                    None if headroom in (None, "") else float(headroom), str(r.get("framework") or ""),
                    None if lofo in (None, "") else float(lofo))


def residual_of(row: Row, loo_error_pct: float, point: Optional[Point] = None, fitted: bool = True,
                lofo_error_pct: Optional[float] = None) -> Residual:
    """The residual of a calibration (or measured) row, placed at its ``point`` when known."""
    p = point or Point()
    return Residual(row.id, row.family, row.ipu, row.ipus, row.micro_batch, row.grad_accum, round(loo_error_pct, 2),
                    fitted, p.ipus_per_replica, p.elements, p.elements_kind, p.samples_per_step, p.tile_headroom,
                    p.framework, None if lofo_error_pct is None else round(lofo_error_pct, 2))
