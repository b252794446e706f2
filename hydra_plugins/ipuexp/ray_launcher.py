"""The Hydra Launcher plugin: Hydra's plugin interface around ``ipuexp.runner.sweep`` (Ray) and
``ipuexp.runner.in_process`` (this process), chosen per sweep by ``ipuexp.runner.placement``."""
from __future__ import annotations

import logging
from typing import Any, List, Optional, Sequence

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)


class RayLauncher(Launcher):
    def __init__(self, address: Optional[str] = None, num_cpus: Optional[int] = None,
                 object_store_memory: Optional[int] = 200_000_000, cpus_per_job: float = 1.0,
                 max_retries: int = 1, log_to_driver: bool = False, preload: Optional[List[str]] = None,
                 share_captures: bool = True, summary: bool = True,
                 runtime_env: Any = None, in_process_below: int = 0) -> None:
        from ipuexp.runner import placement
        from ipuexp.runner.cluster import RaySettings
        from ipuexp.runner.sweep import LaunchOptions

        placement.check(in_process_below)
        if isinstance(runtime_env, DictConfig):  # Ray checks for plain dicts and lists
            runtime_env = OmegaConf.to_container(runtime_env, resolve=True)
        self.settings = RaySettings(address=address, num_cpus=num_cpus, object_store_memory=object_store_memory,
                                    log_to_driver=log_to_driver)
        self.options = LaunchOptions(cpus_per_job=cpus_per_job, max_retries=max_retries,
                                     preload=list(preload if preload is not None else ["ipuexp.app"]),
                                     share_captures=share_captures, summary=summary,
                                     runtime_env=dict(runtime_env) if runtime_env else None)
        self.in_process_below = in_process_below
        self.config: Optional[DictConfig] = None
        self.task_function: Optional[TaskFunction] = None
        self.hydra_context: Optional[HydraContext] = None
        self.tally: Any = None
        """The sweep's ``ipuexp.runner.tally.Tally``, set by ipuexp's sweepers; None under any other sweeper."""

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from ipuexp.runner.placement import functional, in_process

        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        points = self.tally.total if self.tally is not None else len(job_overrides)
        why = in_process(self.settings, self.options.runtime_env, self.in_process_below, points,
                         functional(self.config, job_overrides))
        if why is not None:
            from ipuexp.runner import in_process as here
            from ipuexp.tracking import recorder, recorder_loop

            recorder.start_aside(recorder_loop.serve)  # the sweep's MLflow runs are written on the other core meanwhile

            return here.launch(hydra_context=self.hydra_context, task_function=self.task_function,
                               config=self.config, job_overrides=job_overrides, initial_job_idx=initial_job_idx,
                               why=why, show_summary=self.options.summary, tally=self.tally,
                               records=recorder.active())
        from ipuexp.runner.sweep import launch
        from ipuexp.tracking import recorder

        recorder.start_here()  # the parent run exists before any worker looks for it
        return launch(hydra_context=self.hydra_context, task_function=self.task_function, config=self.config,
                      job_overrides=job_overrides, initial_job_idx=initial_job_idx, settings=self.settings,
                      options=self.options, tally=self.tally)
