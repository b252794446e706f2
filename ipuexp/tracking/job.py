"""What tracking knows of one job, found once as the job starts (:meth:`JobTracking.of`): whether it is tracked,
its store and experiment, its configuration as plain values and their hash, the sweep it is a point of, and whether
it need not run (``tracking.skip_completed``, or a point finished in the lost sweep this one resumes:
:mod:`ipuexp.tracking.resume`). The job reads them from this one object as it runs (its run:
``ipuexp.tracking.runs.track_job``; its report)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from omegaconf import DictConfig

from ipuexp.tracking.identity import config_hash, resolved
from ipuexp.tracking.store import experiment_name, tracking_uri
from ipuexp.tracking.sweep import SweepContext


@dataclass
class JobTracking:
    """One job as tracking sees it."""

    cfg: DictConfig
    """The job's configuration (its run's ``config.yaml`` when the job writes none)."""
    enabled: bool
    """``tracking.enabled``: the job has an MLflow run."""
    uri: str = ""
    """The store (``tracking.uri``, else ``MLFLOW_TRACKING_URI``, else MLflow's default; local paths absolute)."""
    experiment: str = ""
    data: Dict[str, Any] = field(default_factory=dict)
    """The configuration as plain values: interpolations resolved, enums as their names."""
    config_hash: str = ""
    """What the job computes, hashed (``identity.config_hash``): the tag resume looks runs up by."""
    sweep: Optional[SweepContext] = None
    """Where the job sits in a multirun (None: a single run)."""
    skip: bool = False
    """The configuration need not run: it has a FINISHED run that counts (``tracking.resume``)."""
    _completed: Any = field(default=None, repr=False)

    @classmethod
    def of(cls, cfg: DictConfig, sweep: Optional[SweepContext] = None) -> "JobTracking":
        """Ask the configuration, the Hydra job and the store once: identity, store, sweep (``sweep``, else the
        current Hydra multirun's), resume. A store that fails as resume asks it is one line
        (:class:`~ipuexp.tracking.run_entries.StoreFailed`)."""
        if not cfg.tracking.enabled:
            return cls(cfg, enabled=False)
        data = resolved(cfg)
        in_hydra = SweepContext.from_hydra()  # the Hydra multirun this job is a point of, which resume reads
        job = cls(cfg, True, tracking_uri(cfg), experiment_name(cfg), data, config_hash(data), sweep or in_hydra)
        from ipuexp.tracking.resume import completed_run, resumed_points
        from ipuexp.tracking.run_entries import StoreFailed, is_store_error

        try:
            if cfg.tracking.skip_completed:
                job._completed = completed_run(job.uri, job.experiment, job.config_hash)
                job.skip = job._completed is not None
            else:
                job.skip = job.config_hash in resumed_points(job.uri, job.experiment, in_hydra)
        except Exception as exc:
            if not is_store_error(exc):
                raise
            raise StoreFailed(job.uri, exc, None) from None
        return job

    def completed_run(self) -> Optional[Any]:
        """The latest FINISHED run of this configuration in its experiment (None: none, or tracking is off)."""
        if not self.enabled:
            return None
        if self._completed is None:
            from ipuexp.tracking.resume import completed_run

            self._completed = completed_run(self.uri, self.experiment, self.config_hash)
        return self._completed
