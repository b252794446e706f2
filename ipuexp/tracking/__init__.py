"""MLflow tracking of jobs: one run per job, a parent run per sweep, resume by config hash."""
from ipuexp.tracking.job import JobTracking
from ipuexp.tracking.runs import NoRun, TrackedRun, track_job
from ipuexp.tracking.sweep import SweepContext

__all__ = ["JobTracking", "NoRun", "SweepContext", "TrackedRun", "track_job"]
