"""A user's measured runs for ``python -m ipuexp.calibrate``: read from a CSV file or from MLflow, composed into
cases the fit can predict, and screened (a row that does not compose, does not fit in IPU memory, or lies more than
``OUTLIER_FACTOR`` from its prediction is named with the reason and left out).
"""
from __future__ import annotations

import csv
import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ipuexp.calibration import Row, register_runs
from ipuexp.fitting.fit import Case, predict

COLUMNS = ("id", "overrides", "measured_samples_per_s")
OPTIONAL_COLUMNS = ("measured_ipu_memory_bytes",)
IGNORED_OVERRIDES = ("tracking.", "runner.", "hydra.", "report.", "calibration=")
"""Override keys of a recorded run that do not change what it measured."""
OUTLIER_FACTOR = 3.0
"""A measurement this many times above or below its prediction is left out of the fit (``--keep-outliers`` keeps
it): no calibrated constant moves a prediction that far, so it is a different run or a different unit."""


class MeasurementError(ValueError):
    """A measurement file or experiment that cannot be read: one line naming where and what."""


@dataclass(frozen=True)
class Measurement:
    """One measured run as given."""

    id: str
    overrides: Tuple[str, ...]
    samples_per_s: float
    ipu_memory_bytes: Optional[int] = None
    source: str = ""
    """Where it came from: ``FILE line N`` or ``MLflow run ID``."""

    @property
    def overrides_text(self) -> str:
        return " ".join(shlex.quote(o) for o in self.overrides)


@dataclass
class MeasuredCase:
    """A measured run ready to fit: its case (``row.published`` is the measurement), its predictions."""

    measurement: Measurement
    case: Case
    before: float
    """Predicted with the constants being replaced."""
    predicted_memory: int
    """Predicted memory of the fullest IPU."""


def _number(text: str, where: str, column: str, positive: bool = True) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise MeasurementError(f"{where}: {column}={text!r} is invalid: allowed a number") from None
    if positive and not (value > 0 and math.isfinite(value)):
        raise MeasurementError(f"{where}: {column}={text!r} is invalid: allowed a number > 0")
    return value


def read_csv(path: Path) -> List[Measurement]:
    """The rows of a measurement CSV (columns ``COLUMNS``, optionally ``OPTIONAL_COLUMNS``)."""
    if not path.is_file():
        raise MeasurementError(f"{path}: no such file")
    try:
        return _rows(path)
    except UnicodeDecodeError as err:
        raise MeasurementError(f"{path}: byte {err.start} ({err.object[err.start:err.start + 1]!r}) is not UTF-8; "
                               "allowed: a CSV file encoded as UTF-8") from None
    except OSError as err:
        raise MeasurementError(f"{path}: cannot be read ({err.strerror or err})") from None


def _rows(path: Path) -> List[Measurement]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        try:
            return _parse(path, reader)
        except csv.Error as err:
            raise MeasurementError(f"{path}: not readable as CSV ({err}); allowed: a UTF-8 CSV file with the "
                                   f"columns {', '.join(COLUMNS)}") from None


def _parse(path: Path, reader: "csv.DictReader[str]") -> List[Measurement]:
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise MeasurementError(f"{path}: missing column {', '.join(missing)}; the columns are "
                               f"{', '.join(COLUMNS)} and optionally {', '.join(OPTIONAL_COLUMNS)}")
    out: List[Measurement] = []
    for n, r in enumerate(reader, start=2):
        where = f"{path.name} line {n}"
        rid = (r["id"] or "").strip()
        if not rid:
            raise MeasurementError(f"{where}: id is empty")
        memory = (r.get("measured_ipu_memory_bytes") or "").strip()
        out.append(Measurement(rid, tuple(_split(r["overrides"] or "", where)),
                               _number(r["measured_samples_per_s"], where, "measured_samples_per_s"),
                               int(_number(memory, where, "measured_ipu_memory_bytes")) if memory else None,
                               where))
    if not out:
        raise MeasurementError(f"{path}: no rows")
    _unique(out)
    return out


def _split(text: str, where: str) -> List[str]:
    try:
        return shlex.split(text)
    except ValueError as err:
        raise MeasurementError(f"{where}: overrides={text!r} is invalid: {err}") from None


def _unique(rows: Sequence[Measurement]) -> None:
    seen: Dict[str, str] = {}
    for m in rows:
        if m.id in seen:
            raise MeasurementError(f"{m.source}: id={m.id!r} is also on {seen[m.id]}; ids name rows, one each")
        seen[m.id] = m.source


def read_mlflow(experiment: str, uri: str) -> List[Measurement]:
    """FINISHED runs of ``experiment`` that carry a measured throughput of an IPU system (``measured_samples_per_s``
    of an analytic run: ``measured.samples_per_s=...``, or logged by hand); a functional run's measurement is the
    host CPU's, not an IPU's, and is not read."""
    from ipuexp.tracking.store import client, retry

    c = client(uri)
    exp = retry(c.get_experiment_by_name, experiment)
    if exp is None:
        known = ", ".join(sorted(e.name for e in retry(c.search_experiments))) or "none"
        raise MeasurementError(f"--from-mlflow={experiment!r}: no such experiment in {uri}; known: {known}")
    runs = retry(c.search_runs, [exp.experiment_id], filter_string="attributes.status = 'FINISHED'",
                 max_results=5000, order_by=["attributes.start_time ASC"])
    out: Dict[str, Measurement] = {}
    for run in runs:
        tags, metrics = run.data.tags, run.data.metrics
        if "measured_samples_per_s" not in metrics or tags.get("engine_mode") == "functional":
            continue
        # Where a run was recorded and which constants predicted it change nothing the refit reads.
        overrides = [o for o in _split(tags.get("overrides", ""), f"MLflow run {run.info.run_id}")
                     if not o.lstrip("+~").startswith(IGNORED_OVERRIDES)]
        memory = metrics.get("measured_ipu_memory_bytes")
        rid = run.info.run_name or run.info.run_id[:8]
        # The latest run of a configuration stands for it, as in the report.
        key = " ".join(sorted(overrides))
        out[key] = Measurement(rid, tuple(overrides), float(metrics["measured_samples_per_s"]),
                               int(memory) if memory else None, f"MLflow run {run.info.run_id}")
    if not out:
        raise MeasurementError(f"--from-mlflow={experiment!r}: no FINISHED run carries a measured throughput "
                               "(measured_samples_per_s of an analytic run: python -m ipuexp ... "
                               "measured.samples_per_s=N)")
    rows = list(out.values())
    names: Dict[str, int] = {}
    for i, m in enumerate(rows):  # run names repeat across sweeps: the id must name one row
        names[m.id] = names.get(m.id, 0) + 1
        if names[m.id] > 1:
            rows[i] = Measurement(f"{m.id}#{names[m.id]}", m.overrides, m.samples_per_s, m.ipu_memory_bytes, m.source)
    return rows


def prepare(measurements: Sequence[Measurement], constants: Dict[str, float], keep_outliers: bool = False,
            cache_dir: Optional[str] = None) -> Tuple[List[MeasuredCase], List[Tuple[Measurement, str]]]:
    """The measured runs the fit can use, and the ones left out with the reason (one line each)."""
    from ipuexp.config.compose import load_experiment
    from ipuexp.emulator.memory import memory_figures, plan_ipus
    from ipuexp.emulator.position import point_of
    from ipuexp.execution.execution import plan_for
    from ipuexp.graph.capture import capture

    register_runs()  # the shipped calibration runs compose too: +calibration_run=ID
    usable: List[MeasuredCase] = []
    left: List[Tuple[Measurement, str]] = []
    for m in measurements:
        try:
            exp = load_experiment(*m.overrides)
        except Exception as err:  # ConfigError, or what composing raised: its first line
            left.append((m, "does not compose: " + " ".join(str(err).split())[:300]))
            continue
        graph = capture(exp.model, exp.data.micro_batch_size, cache_dir=cache_dir or exp.engine.cache_dir)
        plan = plan_for(exp, graph)
        memory = memory_figures(plan_ipus(plan, graph), plan)
        if not memory.fits:
            first = memory.report[0] if memory.report else "a tile overflows"
            left.append((m, f"does not fit in IPU memory as composed ({first})"))
            continue
        ipus = len(plan.ipus) * plan.replicas
        row = Row(m.id, str(exp.ipu.name), m.samples_per_s, graph.model, str(exp.system.name), ipus,
                  int(exp.data.micro_batch_size), int(exp.options.gradient_accumulation),
                  int(exp.data.packing.max_sequences_per_pack) > 1)
        case = Case(row, plan, graph, point_of(exp.model, graph.model, plan, memory))
        before = predict(case, constants)
        ratio = m.samples_per_s / before
        if not keep_outliers and not 1 / OUTLIER_FACTOR <= ratio <= OUTLIER_FACTOR:
            left.append((m, f"measured {m.samples_per_s:,.4g} is {ratio:.2f}x the prediction {before:,.4g} (more "
                            f"than {OUTLIER_FACTOR:g}x off: another run or another unit?); --keep-outliers fits it"))
            continue
        usable.append(MeasuredCase(m, case, before, max(i.total_bytes for i in memory.ipus)))
    return usable, left
