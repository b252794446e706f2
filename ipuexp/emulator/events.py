"""A step's events: intervals on the IPUs, which the trace and the Gantt chart draw.

A long step has hundreds of thousands. The simulation writes them as columns (``EventRows``: one list per field,
with each event's name and category kept once per kind of pass in a table), which costs a fraction of making an
object per event; ``EventRows.events`` makes the objects for code that wants them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Tuple


@dataclass(slots=True)
class Event:
    """One interval on one IPU (the trace and the Gantt chart draw these)."""

    ipu: int
    name: str
    category: str
    """fwd, bwd, recompute, exchange, host_io, weight_update, all_reduce."""
    start_s: float
    duration_s: float
    stage: int = -1
    micro_batch: int = -1


Part = Tuple[str, str, str, bool]
"""What events of one kind share: the name before the micro-batch's number, the name after it, the category, and
whether the name holds the number (``"F2 mb"``, ``" exchange"``, ``"exchange"``, True: ``"F2 mb7 exchange"``)."""


@dataclass
class EventRows:
    """Events as columns, in the order they were added: ``part`` indexes ``parts``."""

    parts: List[Part] = field(default_factory=list)
    ipu: List[int] = field(default_factory=list)
    part: List[int] = field(default_factory=list)
    start: List[float] = field(default_factory=list)
    duration: List[float] = field(default_factory=list)
    stage: List[int] = field(default_factory=list)
    micro_batch: List[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.start)

    def add_part(self, before: str, after: str, category: str, numbered: bool) -> int:
        self.parts.append((before, after, category, numbered))
        return len(self.parts) - 1

    def add(self, ipu: int, part: int, start: float, duration: float, stage: int = -1, micro_batch: int = -1) -> None:
        self.ipu.append(ipu)
        self.part.append(part)
        self.start.append(start)
        self.duration.append(duration)
        self.stage.append(stage)
        self.micro_batch.append(micro_batch)

    def extend(self, other: "EventRows", shift: float = 0.0) -> None:
        """Add ``other``'s events, ``shift`` seconds later (each start plus ``shift``, as one float addition)."""
        offset = len(self.parts)
        self.parts += other.parts
        self.ipu += other.ipu
        self.part += [p + offset for p in other.part] if offset else other.part
        self.start += [s + shift for s in other.start] if shift else other.start
        self.duration += other.duration
        self.stage += other.stage
        self.micro_batch += other.micro_batch

    def name(self, part: int, micro_batch: int) -> str:
        before, after, _, numbered = self.parts[part]
        return f"{before}{micro_batch}{after}" if numbered else before

    def events(self) -> List[Event]:
        parts = self.parts
        return [Event(i, self.name(p, mb), parts[p][2], s, d, st, mb)
                for i, p, s, d, st, mb in zip(self.ipu, self.part, self.start, self.duration, self.stage,
                                              self.micro_batch)]
