"""What a search did, counted outcome by outcome, and the progress bar that shows it.

A candidate the memory lower bound rejects is counted as pruned, one the rule table rejects is not counted at all.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

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
    seeds: int = 0
    """Structures' seed candidates (the recipe's values on each structure's usual layouts)."""
    budget: int = 0
    """Distinct candidates the sampler was given (``plan.trials``); 0 for an exhaustive search."""
    history: List[Tuple[int, float, float]] = field(default_factory=list)
    """(candidates so far, best fitting samples/s, seconds since the start) each time the best improved."""
    started: float = field(default_factory=time.perf_counter)
    sampling: Tuple[int, int] = (0, 0)
    """Candidates counted when the sampler (or the enumeration) started and when it stopped."""

    @property
    def candidates(self) -> int:
        return self.evaluated + self.pruned

    def note(self, o: Outcome) -> None:
        """Record ``o`` in the history of the best when it beats it."""
        if o.fits and (not self.history or o.score > self.history[-1][1]):
            self.history.append((self.candidates, o.score, time.perf_counter() - self.started))

    def best_at(self, n: int) -> float:
        """Best fitting samples/s after ``n`` candidates (0 before the first that fits)."""
        return max((b for k, b, _ in self.history if k <= n), default=0.0)

    @property
    def seconds_to_best(self) -> float:
        """Seconds from the start until the final best was first evaluated."""
        return self.history[-1][2] if self.history else 0.0

    def late_gain(self, share: float = 0.25) -> float:
        """How much the sampler improved the best over the last ``share`` of its candidates (0.02: by 2%): more
        than a little means it stopped before converging."""
        start, end = self.sampling
        if end <= start:
            return 0.0
        before = self.best_at(int(end - share * (end - start)))
        after = self.best_at(end)
        return after / before - 1.0 if before else (1.0 if after else 0.0)


def count(stats: SearchStats, o: Outcome) -> None:
    if o.status == INVALID:
        stats.invalid += 1
    elif o.status == PRUNED:
        stats.pruned += 1
    else:
        stats.evaluated += 1
    stats.note(o)


def progress_bar(total: Optional[int], quiet: bool) -> Any:
    """The search's progress bar, on a terminal only: a log or a pipe gets no ``\r`` frames (the command's summary
    says how many candidates it took, and how long)."""
    import sys

    from tqdm import tqdm

    terminal = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    return tqdm(total=total, unit="cand", desc="planning", disable=quiet or not terminal, dynamic_ncols=True,
                leave=False)


def show_best(bar: Any, outcomes: Dict[Candidate, Outcome]) -> None:
    best = max((o.score for o in outcomes.values() if o.fits), default=0.0)
    bar.set_postfix_str(f"best {best:,.0f} samples/s", refresh=False)
