"""hydra-optuna-sweeper's ``OptunaSweeper`` with the sweep's one summary (``ipuexp.runner.optuna_study``), which
``python -m ipuexp`` runs for ``hydra/sweeper=optuna``. Defined only where the ``optuna`` extra is installed."""
from pathlib import Path
from typing import Any, List

try:
    from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper as _HydraOptunaSweeper
except ImportError:  # no Optuna sweeper to extend
    _HydraOptunaSweeper = None

if _HydraOptunaSweeper is not None:

    class OptunaSweeper(_HydraOptunaSweeper):
        """The same settings, study and ``optimization_results.yaml``; the table and best trial once, at the end."""

        def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
            from ipuexp.runner.optuna_study import tally_trials

            super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
            self.sweep_dir = Path(str(config.hydra.sweep.dir))
            self.tally = tally_trials(self.sweeper, config)

        def sweep(self, arguments: List[str]) -> None:
            from ipuexp.runner.optuna_study import run_study

            run_study(self.sweeper, self.tally, self.sweep_dir, arguments)
