"""What a job's run is made of when the recorder writes it (:mod:`ipuexp.tracking.recorder`): plain values, pickled
between the driver and the recorder."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Optional, Tuple


@dataclass
class Started:
    """What the sweep's start found: where its runs go, and the config hashes a resumed lost sweep finished."""

    uri: str
    experiment_id: str
    parent_id: Optional[str]
    """The sweep's parent run; None for a single run."""
    resumed: FrozenSet[str] = frozenset()


@dataclass
class JobRecord:
    """One job's run as the job saw it, sent to the recorder when the job ends (plain values: it is pickled)."""

    uri: str
    experiment: str
    data: Dict[str, Any]
    """The job's resolved configuration (``identity.resolved``): its tags and parameters are made from it."""
    overrides: List[str]
    sweep: Any
    """The job's ``SweepContext``; None for a single run."""
    name: Optional[str]
    start_ms: int
    end_ms: int = 0
    status: str = "FINISHED"
    metrics: List[Tuple[str, float, int, int]] = field(default_factory=list)
    tags: List[Tuple[str, str]] = field(default_factory=list)
    files: List[Tuple[str, Optional[str]]] = field(default_factory=list)
    texts: Dict[str, str] = field(default_factory=dict)
    """Files written into the run from text: ``error.txt``, a ``config.yaml`` the job did not write."""
    reply: bool = False
    """The recorder answers once the run is written: a single run waits for its id (it prints it); a sweep reports
    a point done only once its run is in the store (``Recorder.take_answers``)."""
