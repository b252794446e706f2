"""A sweep job's configuration, composed as Hydra's basic launcher composes it (same job number and ``.hydra``
outputs); an override that cannot be composed fails its own job, not the sweep."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ipuexp.runner.errors import JobFailedError, job_error

if TYPE_CHECKING:
    from ipuexp.config.types import ConfigNode


def job_config(hydra_context: Any, config: ConfigNode, overrides: Sequence[str], idx: int) -> Any:
    """Job ``idx``'s configuration: the sweep's ``config`` with ``overrides``."""
    from omegaconf import open_dict

    cfg = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(cfg):
        cfg.hydra.job.id = idx
        cfg.hydra.job.num = idx
    return cfg


def compose_error(exc: Exception) -> JobFailedError:
    """The one-line failure of a job whose configuration could not be composed."""
    from ipuexp.config.errors import from_omegaconf

    return job_error(exc, str(from_omegaconf(exc)), config_error=True)
