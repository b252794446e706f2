"""What a job's run logs of its result and its end, and the one line a failing store gets: shared by the runs a job
writes itself (:mod:`ipuexp.tracking.runs`) and those its recorder writes (:mod:`ipuexp.tracking.deferred`)."""
from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ipuexp.result import Result
from ipuexp.tracking import curated
from ipuexp.tracking.identity import clip_tag

ARTIFACT_SUFFIXES = (".yaml", ".yml", ".json", ".json.gz", ".csv", ".txt", ".html", ".png", ".svg", ".jpg", ".jpeg",
                    ".pdf")
"""Files of ``Result.artifacts`` worth keeping with the run: config, result, charts, traces (not checkpoints)."""
def result_entries(result: Result, tile_memory_bytes: Optional[int]
                   ) -> Tuple[Dict[str, float], List[Tuple[str, str]], List[str]]:
    """What a run logs of a result: its metrics, its tags and the files worth keeping (``ARTIFACT_SUFFIXES``)."""
    figures = {k: float(v) for k, v in curated.metrics(result, tile_memory_bytes).items()}
    tags: List[Tuple[str, str]] = []
    if result.fits is not None:
        tags.append(("fits", str(result.fits).lower()))
    t = result.throughput
    if t is not None:
        # Where no calibration row reaches the configuration (calibration.reach): the axes, in words.
        tags.append(("extrapolated", clip_tag(t.extrapolated) if t.extrapolated else "no"))
    files = [path for path in result.artifacts.values()
             if Path(path).is_file() and path.lower().endswith(ARTIFACT_SUFFIXES)]
    return figures, tags, files


def error_entries(status: str, error: BaseException) -> Tuple[str, Optional[str]]:
    """A run's ``error`` tag for ``error`` and, for a FAILED run, its ``error.txt`` (the traceback)."""
    tag = clip_tag(f"{type(error).__name__}: {error}")
    if status != "FAILED":
        return tag, None
    return tag, "".join(traceback.format_exception(type(error), error, error.__traceback__))


def hydra_overrides() -> List[str]:
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


class StoreFailed(RuntimeError):
    """The tracking store failed as a run started or ended: one line naming the store, what it said and, at the
    end, where the run's result is kept on disk (nothing computed is lost)."""

    def __init__(self, uri: str, error: BaseException, tracked: Optional[Any]):
        said = " ".join(str(error).split())[:200] or type(error).__name__
        if tracked is None:
            super().__init__(f"tracking.uri={uri!r}: the tracking store failed as the run started ({said}); nothing "
                             "was computed yet")
            return
        kept = [str(p) for p, _ in tracked._files if p.name == "result.json"]
        where = f"the run's result is kept in {kept[0]}" if kept else "the run wrote no result"
        super().__init__(f"tracking.uri={uri!r}: the tracking store failed as the run ended ({said}); {where}")


_STORE_MODULES = ("mlflow", "sqlalchemy", "sqlite3", "requests", "urllib3", "http", "socket")


def is_store_error(exc: BaseException) -> bool:
    """An error of the store or the way to it (MLflow, its database, the network), wherever in the chain."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in _STORE_MODULES:
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False
