"""Evaluating candidates in batches: in a pool of forked worker processes, or in this process with one worker.

The workers share the captured graphs (the parent captures every micro-batch size before it forks); each process
keeps its own engine caches.
"""
from __future__ import annotations

import math
import os
from typing import Callable, List, Optional, Sequence

from ipuexp.plan.candidate import Candidate
from ipuexp.plan.evaluate import Evaluator, Outcome

_EVALUATOR: Optional[Evaluator] = None  # the forked workers' evaluator (inherited from the parent)


def _evaluate_batch(batch: Sequence[Candidate]) -> List[Outcome]:
    assert _EVALUATOR is not None
    return [_EVALUATOR.evaluate(c) for c in batch]


class Pool:
    """Evaluates batches in forked worker processes, or in this process with one worker."""

    def __init__(self, evaluator: Evaluator, workers: int):
        self.evaluator = evaluator
        self.workers = workers
        self._pool = None
        if workers > 1:
            import multiprocessing

            global _EVALUATOR
            _EVALUATOR = evaluator
            self._pool = multiprocessing.get_context("fork").Pool(workers)

    def map_async(self, batch: List[Candidate]) -> Callable[[], List[Outcome]]:
        """Start evaluating ``batch``; the returned function waits for the outcomes."""
        if self._pool is None:
            return lambda: [self.evaluator.evaluate(c) for c in batch]
        chunk = max(1, math.ceil(len(batch) / (self.workers * 2)))
        parts = [batch[i:i + chunk] for i in range(0, len(batch), chunk)]
        pending = self._pool.map_async(_evaluate_batch, parts)
        return lambda: [o for part in pending.get() for o in part]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()


def workers_for(requested: int) -> int:
    return requested if requested > 0 else max(1, os.cpu_count() or 1)
