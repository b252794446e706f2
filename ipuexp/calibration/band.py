"""Error band of a throughput prediction, from the leave-one-out residuals of the calibration rows.

``python -m ipuexp.validate --fit --write`` refits the constants without each calibration row, predicts the row,
and writes the residual (percent) with the row's family, system size, micro-batch and gradient accumulation to
``residuals.csv`` next to the table. A prediction's band is ``COVERAGE_K`` (2: about a 95% interval for a normal
residual) times the root mean square of the leave-one-out residuals of its model family's rows (a family's error
comes from what the model does and does not explain about that family, so other families' rows do not set it),
at least ``MIN_BAND_PCT``. A family with one row takes the larger of that row's residual and the RMS of the whole
table (one residual alone is no estimate of a spread). The band is widened when the configuration lies outside
what the table covers, each widening with its reason:

* a model family with no calibration row (T5, Whisper, ConvNeXt, ...): ``COVERAGE_K`` times the RMS of the
  fitted rows' leave-one-family-out residuals (each row predicted with the constants refitted without its whole
  family: how far off the fit is on a family it never saw), at least ``MIN_BAND_PCT``; an unexplained row's
  family, whose error is a mechanism the model lacks, is not counted. A table without those residuals takes the
  ``NEAREST`` most similar rows (closest system size, micro-batch and gradient accumulation on a log scale), at
  least the band of the whole table, times ``NEW_FAMILY_FACTOR``;
* a family with rows, but none on this IPU generation: ``x GENERATION_FACTOR`` (the terms counted in seconds,
  links and host, weigh differently at another clock), and the spread of frameworks and SDKs
  (``SOFTWARE_SPREAD_PCT``, added in quadrature: another generation usually ran another SDK);
* a larger system than any row: ``+SIZE_FACTOR`` of the band per doubling beyond the largest;
* micro-batch or gradient accumulation more than 2x outside the table's range: ``x RANGE_FACTOR`` each;
* a family whose every row is unexplained (ViT, GPT: rows listed in ``validate.yaml``, or a user's measured family
  that stays far off after ``calibrate``): the band of a family with no row, and at least the largest error of those
  rows ``compounded`` (twice it on the scale errors multiply on: +44% gives +-107%), not that error grown with the
  distance: the mechanism the model lacks acts wherever the family runs;
* a micro-batch below every fitted row's (micro-batch 1): at least the largest residual of the unexplained rows
  (GPT-2's, ViT's) ``compounded``, since every fixed cost of a pass weighs more there, the published runs there
  are slower than the model explains (docs/emulator.md, "Micro-batch 1 at long sequences") and no fitted row bounds
  how much.

Beyond its family, a prediction is as good as the rows near it (``Point``: IPUs per replica, tokens or pixels per
micro-batch, samples per weight update, the fullest tile's headroom, system size, host framework). A row *reaches*
a configuration when every axis is within ``REACH`` of it (a factor 2 on the counted axes, 10 points of headroom,
the same framework). Beyond the nearest row's reach the band grows by ``GROWTH`` per reach-width of excess
distance, and a configuration that no row reaches is *extrapolated*: the band says so, names the axes and the range
the rows span there, and is at least ``extrapolation floor``: the largest leave-one-out error of the fitted rows
that were themselves outside the reach of every other row (how far off the model was where it had to extrapolate).

Reading the residuals is cached: a band costs microseconds.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ipuexp.calibration import family
from ipuexp.calibration.evidence import Point, Residual, load_residuals
from ipuexp.calibration.reach import describe, extrapolation_floor, nearest, outside_axes

NEAREST = 3
COVERAGE_K = 2.0
MIN_BAND_PCT = 3.0
NEW_FAMILY_FACTOR = 1.5
GENERATION_FACTOR = 1.5
SIZE_FACTOR = 0.5
RANGE_FACTOR = 1.25
SOFTWARE_SPREAD_PCT = 7.0
"""How far frameworks and SDK versions alone move one published configuration: BERT-Large phase 1 on a Bow POD16
at 4,527 (TensorFlow 2, SDK 3.3), 5,125 (TensorFlow 1) and 5,179 sequences/s (PopART), about +-7% (Graphcore's
performance results page; docs/emulator.md, Validation)."""
GROWTH = 0.5
"""Band growth per reach-width of distance beyond the nearest row's reach (``calibration.reach``)."""
# Distance scales (log2 units that count as one step of dissimilarity) and the cost of another family.
_SCALE_IPUS, _SCALE_MBS, _SCALE_GA, _FAMILY_DISTANCE = 2.0, 1.5, 3.0, 2.0


@dataclass(frozen=True)
class Band:
    pct: float
    """Half-width of the band, percent: the bound on the prediction's error, predicted / measured - 1
    (``calibration.band_ends``)."""
    reasons: Tuple[str, ...]
    """What the band rests on and why it was widened, each calibration row named (``result.json``)."""
    summary: Tuple[str, ...] = ()
    """The same, short and without row ids: the console's one line."""
    extrapolated: Optional[str] = None
    """The axes on which no calibration row reaches the configuration, with the span the rows cover there; None
    when a row reaches it."""
    nearest: Optional[str] = None
    """The calibration row nearest the configuration along the reach axes (with ``point``)."""
    distance: float = 0.0
    """How far beyond that row's reach, in reach-widths (0: within it)."""


def _log2(a: float, b: float) -> float:
    return math.log2(max(a, 1) / max(b, 1))


def compounded(error_pct: float) -> float:
    """``COVERAGE_K`` times an error on the scale errors multiply on, as a band in percent: a prediction 1.44x the
    measurement (+44%) gives 1.44 ** 2 = 2.07x, +-107%; one 0.8x (-20%) gives 0.64x, +-36%. Near zero it is
    ``COVERAGE_K`` times the error, as for the other bands; far from it, twice as far off means the factor squared,
    not the percent doubled (+88% would be 1.88x where twice 1.44x off is 2.07x)."""
    return abs((1.0 + error_pct / 100.0) ** COVERAGE_K - 1.0) * 100.0


def _rms(values: Sequence[float]) -> float:
    return math.sqrt(sum(v * v for v in values) / len(values)) if values else 0.0


def error_band(model: str, ipus: int, micro_batch: int, grad_accum: int, exclude: Optional[str] = None,
               residuals: Optional[Sequence[Residual]] = None, ipu: Optional[str] = None,
               point: Optional[Point] = None) -> Optional[Band]:
    """Band of a prediction for ``model`` on ``ipus`` IPUs at this micro-batch and gradient accumulation (None
    without residuals). ``exclude`` leaves a calibration row out (validation of the band itself); ``ipu`` is the
    IPU generation (mk1, mk2, bow), when known; ``point``, where the configuration sits (``calibration.reach``):
    with it the band grows with the distance from the rows instead of the size and range rules."""
    rows: List[Residual] = [r for r in (load_residuals() if residuals is None else residuals) if r.id != exclude]
    if not rows:
        return None
    fam = family(model)

    def distance(r: Residual) -> float:
        return math.sqrt((0.0 if r.family == fam else _FAMILY_DISTANCE) ** 2
                         + (_log2(ipus, r.ipus) / _SCALE_IPUS) ** 2
                         + (_log2(micro_batch, r.micro_batch) / _SCALE_MBS) ** 2
                         + (_log2(grad_accum, r.grad_accum) / _SCALE_GA) ** 2)

    # The table's spread over the rows the model explains: an unexplained row's error is its family's, not the
    # table's (its own family's band carries it).
    table_rms = _rms([r.loo_error_pct for r in rows if r.fitted] or [r.loo_error_pct for r in rows])
    own = [r for r in rows if r.family == fam]
    # A family whose every row is unexplained (ViT, GPT-2 at 1,024 tokens) has an error the model lacks a mechanism
    # for, the same wherever the family runs: its band is that of a family the model has not seen (grown with the
    # distance like any), at least twice that error as a factor, never that error grown with the distance.
    unexplained = own if own and not any(r.fitted for r in own) else []
    if unexplained:
        own = []
    none_here = (f"no calibration row of the {fam} family the model explains" if unexplained
                 else f"no calibration row of the {fam} family")
    none_short = f"no explained {fam} row" if unexplained else f"no {fam} row"
    if len(own) >= 2:
        pct = max(MIN_BAND_PCT, COVERAGE_K * _rms([r.loo_error_pct for r in own]))
        reasons = [f"leave-one-out residuals of the {fam} rows: {', '.join(r.id for r in own)}"]
        short = [f"leave-one-out residuals of the {len(own)} {fam} rows"]
    elif own:
        pct = max(MIN_BAND_PCT, COVERAGE_K * max(abs(own[0].loo_error_pct), table_rms))
        reasons = [f"the leave-one-out residual of {own[0].id}, the one {fam} row, at least the table's RMS"]
        short = [f"the one {fam} row's leave-one-out residual, at least the table's RMS"]
    elif [r for r in rows if r.fitted and r.lofo_error_pct is not None]:
        lofo = [r for r in rows if r.fitted and r.lofo_error_pct is not None]
        families = sorted({r.family for r in lofo})
        pct = max(MIN_BAND_PCT, COVERAGE_K * _rms([r.lofo_error_pct for r in lofo]))
        reasons = [f"leave-one-family-out residuals of the {len(families)} calibrated families "
                   f"({', '.join(families)})", none_here]
        short = [f"leave-one-family-out residuals of {len(families)} families", none_short]
    else:
        near = sorted([r for r in rows if r.fitted] or rows, key=distance)[:NEAREST]
        pct = max(MIN_BAND_PCT, COVERAGE_K * _rms([r.loo_error_pct for r in near]), COVERAGE_K * table_rms)
        pct *= NEW_FAMILY_FACTOR
        reasons = [f"leave-one-out residuals of {', '.join(r.id for r in near)} and of the whole table",
                   none_here]
        short = [f"residuals of the {len(near)} nearest rows and the table", none_short]
    if own and ipu and ipu not in {r.ipu for r in own}:
        # Another generation usually ran another SDK: add the spread the same configuration shows across
        # frameworks and SDKs (SOFTWARE_SPREAD_PCT) to the widened band.
        pct = math.hypot(pct * GENERATION_FACTOR, SOFTWARE_SPREAD_PCT)
        reasons.append(f"no {fam} calibration row on {ipu}")
        short.append(f"no {fam} row on {ipu}")
    if point is not None:
        band = _reach_band(rows, point, pct, reasons, short)
        return _small_micro_batch_floor(rows, micro_batch, _unexplained_floor(unexplained, table_rms, band))
    largest = max(r.ipus for r in rows)
    if ipus > largest:
        doublings = _log2(ipus, largest)
        pct *= 1 + SIZE_FACTOR * doublings
        reasons.append(f"{ipus} IPUs, larger than any calibration row ({largest})")
        short.append(f"{ipus} IPUs, beyond the table's {largest}")
    for name, value, seen in (("micro-batch", micro_batch, [r.micro_batch for r in rows]),
                              ("gradient accumulation", grad_accum, [r.grad_accum for r in rows])):
        if value < min(seen) / 2 or value > 2 * max(seen):
            pct *= RANGE_FACTOR
            reasons.append(f"{name} {value} outside the calibration's {min(seen)}..{max(seen)}")
            short.append(f"{name} {value} outside {min(seen)}..{max(seen)}")
    band = _unexplained_floor(unexplained, table_rms, Band(pct, tuple(reasons), tuple(short)))
    return _small_micro_batch_floor(rows, micro_batch, band)


def _unexplained_floor(own: Sequence[Residual], table_rms: float, band: Band) -> Band:
    """At least the largest error of the family's unexplained rows ``compounded`` (and ``COVERAGE_K`` times the
    table's RMS), so that the published runs that show the missing mechanism lie inside the band wherever the family
    runs: the mechanism acts on each of them by its own amount, up to twice as far off as the row."""
    if not own:
        return band
    worst = max(own, key=lambda r: abs(r.loo_error_pct))
    floor = max(compounded(worst.loo_error_pct), COVERAGE_K * table_rms)
    fam = worst.family
    reason = (f"the {fam} rows' error is not explained ({worst.loo_error_pct:+.0f}% of {worst.id}): at least twice "
              f"it, compounded")
    short = f"{fam}'s unexplained error ({worst.loo_error_pct:+.0f}%): at least twice it, compounded"
    if floor <= band.pct:
        return dataclasses.replace(band, reasons=(*band.reasons, reason))
    return dataclasses.replace(band, pct=floor, reasons=(*band.reasons, reason), summary=(*band.summary, short))


def _small_micro_batch_floor(rows: Sequence[Residual], micro_batch: int, band: Band) -> Band:
    """A micro-batch smaller than every fitted row's is where the model is least sure: every fixed cost of a pass
    weighs more, and the published runs there are slower than the model explains. No fitted row bounds the gap, so
    the band is at least the largest residual of the rows the model does not explain, ``compounded``."""
    fitted = [r.micro_batch for r in rows if r.fitted and r.micro_batch]
    if not micro_batch or not fitted or micro_batch >= min(fitted):
        return band
    there = [r for r in rows if not r.fitted]
    if not there:
        return band
    worst = max(there, key=lambda r: abs(r.loo_error_pct))
    floor = compounded(worst.loo_error_pct)
    if floor <= band.pct:
        return band
    reason = (f"micro-batch {micro_batch}, below every fitted row's ({min(fitted)}): at least twice the largest "
              f"unexplained error, compounded, {worst.loo_error_pct:+.0f}% of {worst.id}")
    short = (f"micro-batch {micro_batch}: at least twice the largest unexplained error, compounded "
             f"({worst.loo_error_pct:+.0f}%)")
    return dataclasses.replace(band, pct=floor, reasons=(*band.reasons, reason), summary=(*band.summary, short))


def _reach_band(rows: Sequence[Residual], point: Point, pct: float, reasons: List[str], short: List[str]) -> Band:
    """Widen ``pct`` with the distance of ``point`` from the nearest row; floor an extrapolation."""
    row, d = nearest(rows, point)
    if row is None:
        return Band(pct, tuple(reasons), tuple(short))
    if d <= 0:
        reasons.append(f"within the reach of {row.id}")
        short.append("within a row's reach")
        return Band(pct, tuple(reasons), tuple(short), nearest=row.id)
    pct *= 1 + GROWTH * d
    reasons.append(f"{d:.1f} reach-widths beyond the nearest row, {row.id}")
    short.append(f"{d:.1f} reach-widths beyond the nearest row")
    axes = outside_axes(rows, point)
    if not axes:
        return Band(pct, tuple(reasons), tuple(short), nearest=row.id, distance=d)
    words = describe(rows, point, axes)
    floor, outside = extrapolation_floor(rows)
    if floor > pct:
        pct = floor
        reasons.append(f"at least the largest leave-one-out error of the rows outside the others' reach "
                       f"({', '.join(r.id for r in outside)})")
        short.append("at least the worst error where rows extrapolated")
    reasons.append(f"extrapolated: {words}")
    return Band(pct, tuple(reasons), tuple(short), extrapolated=words, nearest=row.id, distance=d)
