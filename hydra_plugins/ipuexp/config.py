"""The launchers' configurations, registered as ``hydra/launcher: ray`` (every sweep on Ray) and ``hydra/launcher:
ipuexp`` (the default: small sweeps in this process), and the sweeper's, ``hydra/sweeper: ipuexp``.

The Ray settings default to the experiment's ``runner.ray`` block (``oc.select`` leaves them unset for a Hydra app
that has none), so ``runner.ray.address=auto`` on the command line is enough to sweep on a cluster.
"""
# No "from __future__ import annotations": Hydra executes plugin modules outside sys.modules, where dataclasses
# cannot resolve string annotations.
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore

from ipuexp.runner.placement import IN_PROCESS_BELOW


@dataclass
class RayLauncherConf:
    _target_: str = "hydra_plugins.ipuexp.ray_launcher.RayLauncher"
    address: Optional[str] = "${oc.select:runner.ray.address,null}"
    """None: a new local Ray (or RAY_ADDRESS); 'auto', 'host:port' or 'ray://host:10001': join that cluster."""
    num_cpus: Optional[int] = "${oc.select:runner.ray.num_cpus,null}"  # type: ignore[assignment]
    """CPUs of a local Ray (None: the machine's)."""
    object_store_memory: Optional[int] = (  # type: ignore[assignment]
        "${oc.select:runner.ray.object_store_memory,200000000}")
    """Object store bytes of a local Ray."""
    cpus_per_job: float = 1.0
    """Ray CPUs each job reserves."""
    max_retries: int = 1
    """Re-runs of a job whose worker process died; a job that raised is never re-run."""
    log_to_driver: bool = False
    """Forward the workers' console output here; each job's log is in its job folder either way."""
    preload: List[str] = field(default_factory=lambda: ["ipuexp.app"])
    """Modules every worker imports once, before its first job."""
    share_captures: bool = True
    """Capture each distinct model once per sweep and give the graph to all jobs that need it."""
    summary: bool = True
    """Print the one-line-per-point table at the end of the sweep."""
    runtime_env: Any = None
    """Ray runtime environment of the jobs (e.g. ``{env_vars: {NAME: value}}``, ``pip``)."""
    in_process_below: int = 0
    """Sweeps with fewer points run one job after another in this process, unless a Ray address or runtime
    environment is given (``ipuexp.runner.placement``); 0: every sweep on Ray."""


ConfigStore.instance().store(group="hydra/launcher", name="ray", node=RayLauncherConf,
                             provider="ipuexp")


@dataclass
class IpuexpLauncherConf(RayLauncherConf):
    """The default launcher: the ``ray`` launcher's settings, small sweeps in this process (a local Ray's start-up
    costs more than it saves there), larger ones and any sweep given a Ray address on Ray."""

    in_process_below: int = IN_PROCESS_BELOW


ConfigStore.instance().store(group="hydra/launcher", name="ipuexp", node=IpuexpLauncherConf,
                             provider="ipuexp")


@dataclass
class PreflightSweeperConf:
    """Hydra's basic sweeper settings (``max_batch_size``, ``params``) for ``sweeper.PreflightSweeper``."""

    _target_: str = "hydra_plugins.ipuexp.sweeper.PreflightSweeper"
    max_batch_size: Optional[int] = None
    params: Optional[Dict[str, str]] = None


ConfigStore.instance().store(group="hydra/sweeper", name="ipuexp", node=PreflightSweeperConf,
                             provider="ipuexp")
