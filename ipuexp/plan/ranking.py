"""The outcomes of a search ranked: the fastest that fit, the most tempting that do not."""
from __future__ import annotations

from typing import Dict, List, Optional

from ipuexp.plan.candidate import Candidate
from ipuexp.plan.evaluate import OOM, PRUNED, Outcome


def ranked(outcomes: Dict[Candidate, Outcome]) -> List[Outcome]:
    """Fitting candidates, best first by ``Outcome.score`` (``plan.rank``; ties: more tile headroom first)."""
    return sorted((o for o in outcomes.values() if o.fits), key=lambda o: (-round(o.score, 1),
                                                                         o.peak_tile_bytes))


def rejected(outcomes: Dict[Candidate, Outcome], best: Optional[Outcome], n: int) -> List[Outcome]:
    """The most promising rejected candidates: those out of memory that would have been faster than ``best``,
    smallest shortfall first (the nearest to fitting), then the others closest to fitting."""
    floor = best.score if best is not None else 0.0
    oom = sorted((o for o in outcomes.values() if o.status == OOM and o.score > floor),
                 key=lambda o: (o.shortfall_bytes, -o.score))
    if len(oom) >= n:
        return oom[:n]
    close = sorted((o for o in outcomes.values() if o.status in (OOM, PRUNED) and o not in oom),
                   key=lambda o: o.shortfall_bytes)
    return oom + close[:n - len(oom)]


def closest(outcomes: Dict[Candidate, Outcome]) -> Optional[Outcome]:
    """The rejected candidate with the smallest memory shortfall."""
    return min((o for o in outcomes.values() if o.status in (OOM, PRUNED)), key=lambda o: o.shortfall_bytes,
               default=None)
