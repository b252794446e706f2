"""A sweep's runs read back from MLflow as a :class:`~ipuexp.report.sweep.Sweep`: the FINISHED job runs of an
experiment, of all its sweeps, the latest one or one parent run; the latest run of each configuration."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ipuexp.report.sweep import (BAND, FUNCTIONAL_THROUGHPUT, HEADROOM, HOST_THROUGHPUT, MEASURED, MEASURED_MEMORY,
                                 MEASURED_RATIO, PEAK_MEMORY, SEQUENCES, SHIPPED, THROUGHPUT, Point, ReportError,
                                 Sweep, swept_options)


def load(uri: str, experiment: str, sweep: str = "all") -> Sweep:
    """Read FINISHED job runs of ``experiment``: ``sweep`` is ``all`` (latest run per config hash), ``latest``
    (the newest sweep's children) or a parent run id."""
    from ipuexp.tracking.store import client, quoted, retry
    from ipuexp.tracking.sweep import PARENT_TAG, SWEEP_KEY_TAG

    c = client(uri)
    exp = retry(c.get_experiment_by_name, experiment)
    if exp is None:
        known = ", ".join(sorted(e.name for e in retry(c.search_experiments))) or "none"
        raise ReportError(f"experiment={experiment!r} not found in {uri}; known experiments: {known}")
    filters = ["attributes.status = 'FINISHED'"]
    if sweep != "all":
        parent = sweep
        if sweep == "latest":
            parents = retry(c.search_runs, [exp.experiment_id], filter_string=f"tags.{SWEEP_KEY_TAG} LIKE '%'",
                            max_results=1, order_by=["attributes.start_time DESC"])
            if not parents:
                raise ReportError(f"sweep=latest: experiment {experiment!r} has no sweep (multirun) runs")
            parent = parents[0].info.run_id
        filters.append(f"tags.`{PARENT_TAG}` = {quoted(parent)}")
    runs = _search_all(c, exp.experiment_id, " and ".join(filters))
    latest: Dict[str, Any] = {}
    for run in sorted(runs, key=lambda r: r.info.start_time):
        key = run.data.tags.get("config_hash")
        if key is not None:  # job runs only (sweep parents carry no config hash)
            latest[key] = run
    if not latest:
        raise ReportError(f"experiment={experiment!r}, sweep={sweep!r}: no FINISHED job runs to report")
    points = [_point(r) for r in sorted(latest.values(), key=lambda r: r.info.start_time)]
    capacities = [r.data.metrics[PEAK_MEMORY] + r.data.metrics[HEADROOM] for r in latest.values()
                  if PEAK_MEMORY in r.data.metrics and HEADROOM in r.data.metrics]
    return Sweep(experiment=experiment, points=points, options=swept_options(points),
                 capacity=max(capacities) if capacities else None)


def _search_all(c: Any, experiment_id: str, filter_string: str) -> List[Any]:
    from ipuexp.tracking.store import retry

    runs, token = [], None
    while True:
        page = retry(c.search_runs, [experiment_id], filter_string=filter_string, max_results=1000,
                     page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _point(run: Any) -> Point:
    from ipuexp.tracking.sweep import PARENT_TAG

    m, tags = run.data.metrics, run.data.tags
    throughput = m.get(THROUGHPUT, m.get(HOST_THROUGHPUT, m.get(FUNCTIONAL_THROUGHPUT)))
    fits: Optional[bool] = None
    if "fits" in m:
        fits = m["fits"] > 0.5
    elif run.data.tags.get("fits") in ("true", "false"):
        fits = run.data.tags["fits"] == "true"
    return Point(run_id=run.info.run_id, name=run.info.run_name or run.info.run_id[:8], params=dict(run.data.params),
                 throughput=throughput, peak_memory=m.get(PEAK_MEMORY), fits=fits,
                 start_time=run.info.start_time, error_band_pct=m.get(BAND),
                 sweep_id=tags.get(PARENT_TAG), sequences_per_s=m.get(SEQUENCES), measured=m.get(MEASURED),
                 measured_memory=m.get(MEASURED_MEMORY), measured_on=_measured_on(m, tags),
                 calibration=_calibration(tags), calibration_name=tags.get("calibration") or SHIPPED)


def _measured_on(metrics: Dict[str, float], tags: Dict[str, str]) -> Optional[str]:
    """Where the run's ``measured_samples_per_s`` was measured. A functional run given ``measured.samples_per_s``
    logs its host figure apart (``host_samples_per_s``); runs from before the ``engine_mode`` tag and the ratio
    logged only functional (host) measurements."""
    if MEASURED not in metrics:
        return None
    mode = tags.get("engine_mode")
    if HOST_THROUGHPUT in metrics:
        return "ipu"
    if mode == "functional" or (mode is None and MEASURED_RATIO not in metrics):
        return "host"
    return "ipu"


def _calibration(tags: Dict[str, str]) -> Optional[str]:
    name, digest = tags.get("calibration"), tags.get("calibration_hash")
    if name is None:
        return None
    return f"{name} ({digest})" if digest else name
