"""Error band of a throughput prediction, from the leave-one-out residuals of the calibration rows.

``python -m ipuexp.validate --fit --write`` refits the constants without each calibration row, predicts the row,
and writes the residual (percent) with the row's family, system size, micro-batch and gradient accumulation to
``residuals.csv`` next to the table. A prediction's band is ``COVERAGE_K`` (2: about a 95% interval for a normal
residual) times the root mean square of the leave-one-out residuals of its model family's rows (a family's error
comes from what the model does and does not explain about that family, so other families' rows do not set it),
at least ``MIN_BAND_PCT``. A family with one row takes the larger of that row's residual and the RMS of the whole
table (one residual alone is no estimate of a spread). The band is widened when the configuration lies outside
what the table covers, each widening with its reason:

* a model family with no calibration row: the ``NEAREST`` most similar rows (closest system size, micro-batch
  and gradient accumulation on a log scale), at least the band of the whole table, times ``NEW_FAMILY_FACTOR``;
* a family with rows, but none on this IPU generation: ``x GENERATION_FACTOR`` (the terms counted in seconds,
  links and host, weigh differently at another clock);
* a larger system than any row: ``+SIZE_FACTOR`` of the band per doubling beyond the largest;
* micro-batch or gradient accumulation more than 2x outside the table's range: ``x RANGE_FACTOR`` each.

Reading the residuals is cached: a band costs microseconds.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from ipuexp.calibration import CALIBRATION_DIR, family

RESIDUALS = CALIBRATION_DIR / "residuals.csv"
RESIDUAL_FIELDS = ("id", "family", "ipu", "ipus", "micro_batch", "grad_accum", "loo_error_pct")
NEAREST = 3
COVERAGE_K = 2.0
MIN_BAND_PCT = 3.0
NEW_FAMILY_FACTOR = 1.5
GENERATION_FACTOR = 1.5
SIZE_FACTOR = 0.5
RANGE_FACTOR = 1.25
# Distance scales (log2 units that count as one step of dissimilarity) and the cost of another family.
_SCALE_IPUS, _SCALE_MBS, _SCALE_GA, _FAMILY_DISTANCE = 2.0, 1.5, 3.0, 2.0


@dataclass(frozen=True)
class Residual:
    id: str
    family: str
    ipu: str
    ipus: int
    micro_batch: int
    grad_accum: int
    loo_error_pct: float


@dataclass(frozen=True)
class Band:
    pct: float
    """Half-width of the band, percent of the prediction."""
    reasons: Tuple[str, ...]
    """What the band rests on and why it was widened."""


def write_residuals(rows: Sequence[Residual], path: Path = RESIDUALS) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(RESIDUAL_FIELDS)
        for r in rows:
            w.writerow([r.id, r.family, r.ipu, r.ipus, r.micro_batch, r.grad_accum, f"{r.loo_error_pct:.2f}"])
    load_residuals.cache_clear()


@lru_cache(maxsize=4)
def load_residuals(path: Path = RESIDUALS) -> Tuple[Residual, ...]:
    if not path.exists():
        return ()
    with open(path, newline="") as f:
        return tuple(Residual(r["id"], r["family"], r["ipu"], int(r["ipus"]), int(r["micro_batch"]),
                              int(r["grad_accum"]), float(r["loo_error_pct"])) for r in csv.DictReader(f))


def _log2(a: float, b: float) -> float:
    return math.log2(max(a, 1) / max(b, 1))


def _rms(values: Sequence[float]) -> float:
    return math.sqrt(sum(v * v for v in values) / len(values)) if values else 0.0


def error_band(model: str, ipus: int, micro_batch: int, grad_accum: int, exclude: Optional[str] = None,
               residuals: Optional[Sequence[Residual]] = None, ipu: Optional[str] = None) -> Optional[Band]:
    """Band of a prediction for ``model`` on ``ipus`` IPUs at this micro-batch and gradient accumulation (None
    without residuals). ``exclude`` leaves a calibration row out (validation of the band itself); ``ipu`` is the
    IPU generation (mk1, mk2, bow), when known."""
    rows: List[Residual] = [r for r in (load_residuals() if residuals is None else residuals) if r.id != exclude]
    if not rows:
        return None
    fam = family(model)

    def distance(r: Residual) -> float:
        return math.sqrt((0.0 if r.family == fam else _FAMILY_DISTANCE) ** 2
                         + (_log2(ipus, r.ipus) / _SCALE_IPUS) ** 2
                         + (_log2(micro_batch, r.micro_batch) / _SCALE_MBS) ** 2
                         + (_log2(grad_accum, r.grad_accum) / _SCALE_GA) ** 2)

    table_rms = _rms([r.loo_error_pct for r in rows])
    own = [r for r in rows if r.family == fam]
    if len(own) >= 2:
        pct = max(MIN_BAND_PCT, COVERAGE_K * _rms([r.loo_error_pct for r in own]))
        reasons = [f"leave-one-out residuals of the {fam} rows: {', '.join(r.id for r in own)}"]
    elif own:
        pct = max(MIN_BAND_PCT, COVERAGE_K * max(abs(own[0].loo_error_pct), table_rms))
        reasons = [f"the leave-one-out residual of {own[0].id}, the one {fam} row, at least the table's RMS"]
    else:
        near = sorted(rows, key=distance)[:NEAREST]
        pct = max(MIN_BAND_PCT, COVERAGE_K * _rms([r.loo_error_pct for r in near]), COVERAGE_K * table_rms)
        pct *= NEW_FAMILY_FACTOR
        reasons = [f"leave-one-out residuals of {', '.join(r.id for r in near)} and of the whole table",
                   f"no calibration row of the {fam} family"]
    if own and ipu and ipu not in {r.ipu for r in own}:
        pct *= GENERATION_FACTOR
        reasons.append(f"no {fam} calibration row on {ipu}")
    largest = max(r.ipus for r in rows)
    if ipus > largest:
        doublings = _log2(ipus, largest)
        pct *= 1 + SIZE_FACTOR * doublings
        reasons.append(f"{ipus} IPUs, larger than any calibration row ({largest})")
    for name, value, seen in (("micro-batch", micro_batch, [r.micro_batch for r in rows]),
                              ("gradient accumulation", grad_accum, [r.grad_accum for r in rows])):
        if value < min(seen) / 2 or value > 2 * max(seen):
            pct *= RANGE_FACTOR
            reasons.append(f"{name} {value} outside the calibration's {min(seen)}..{max(seen)}")
    return Band(pct, tuple(reasons))
