"""What a search did, counted outcome by outcome, and the progress bar that shows it.

A candidate the memory lower bound rejects is counted as pruned, one the rule table rejects is not counted at all.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from ipuexp.plan.candidate import Candidate
from ipuexp.plan.evaluate import INVALID, PRUNED, Outcome


@dataclass
class SearchStats:
    """What the search did."""

    method: str
    space_size: int
    evaluated: int = 0
    """Candidates fully evaluated (memory model, and timing)."""
    pruned: int = 0
    """Candidates rejected by the memory lower bound without the full model."""
    invalid: int = 0
    """Points the config rule table rejects (not candidates)."""
    repeats: int = 0
    """Points Optuna proposed again (answered from the cache)."""
    refined: int = 0
    """Evaluations spent raising the best candidates' per-IPU available memory proportion."""
    seconds: float = 0.0
    workers: int = 1

    @property
    def candidates(self) -> int:
        return self.evaluated + self.pruned


def count(stats: SearchStats, o: Outcome) -> None:
    if o.status == INVALID:
        stats.invalid += 1
    elif o.status == PRUNED:
        stats.pruned += 1
    else:
        stats.evaluated += 1


def progress_bar(total: Optional[int], quiet: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, unit="cand", desc="planning", disable=quiet, dynamic_ncols=True, leave=False)


def show_best(bar: Any, outcomes: Dict[Candidate, Outcome]) -> None:
    best = max((o.samples_per_s for o in outcomes.values() if o.fits), default=0.0)
    bar.set_postfix_str(f"best {best:,.0f} samples/s", refresh=False)
