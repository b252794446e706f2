"""ipuexp's Optuna sweeper (``hydra/sweeper=optuna``): Hydra's sweeper plugin API on current Optuna, and its settings
(``ipuexp.sweeps.optuna_config``) registered as ``hydra/sweeper: optuna`` and ``hydra/sweeper/sampler: NAME``. The
study itself, its storage and its summary are ``ipuexp.sweeps.optuna_study``; Optuna is imported when the sweep
starts."""
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper

from ipuexp.sweeps.optuna_config import SAMPLERS, OptunaSweeperConf


class OptunaSweeper(Sweeper):
    """Asks Optuna for ``n_jobs`` trials at a time, launches them as jobs and tells it what each returned."""

    def __init__(self, sampler: Any, objectives: Any, direction: Any, storage: Optional[str],
                 study_name: Optional[str], n_trials: int, n_jobs: int, max_failure_rate: Optional[float],
                 params: Any, custom_search_space: Optional[str], search_space: Any = None) -> None:
        self.sampler, self.objectives, self.direction = sampler, objectives, direction
        self.search_space = search_space
        self.storage, self.study_name = storage, study_name
        self.n_trials, self.n_jobs, self.max_failure_rate = n_trials, n_jobs, max_failure_rate
        self.params, self.custom_search_space = params, custom_search_space
        self.config: Any = None
        self.launcher: Any = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
        from hydra.core.plugins import Plugins

        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(config=config, hydra_context=hydra_context,
                                                                task_function=task_function)

    def sweep(self, arguments: List[str]) -> None:
        import logging

        from hydra_plugins.ipuexp.optuna_name import installed_too
        from ipuexp.sweeps.optuna_study import run_study

        both = installed_too()
        if both:
            logging.getLogger(__name__).info(both)
        run_study(self, arguments)


_STORE = ConfigStore.instance()
_STORE.store(group="hydra/sweeper", name="optuna", node=OptunaSweeperConf, provider="ipuexp")
for _name, _node in SAMPLERS.items():
    _STORE.store(group="hydra/sweeper/sampler", name=_name, node=_node, provider="ipuexp")
