"""Choosing the points of a sweep: what ipuexp's Hydra sweepers do, apart from Hydra's plugin interface (whose thin
classes are in ``hydra_plugins/ipuexp``). The runner (``ipuexp.runner``) runs the points they choose.

``basic`` is the basic sweeper (``hydra/sweeper=ipuexp``, the default): Hydra's grid, batches until one fails, one
summary at the end. The Optuna sweeper (``hydra/sweeper=optuna``; hydra-optuna-sweeper 1.2's study for any other
Hydra app) has its settings in ``optuna_config``, its study (storage, resume, ask) in ``optuna_study``, what each
trial is told (run metrics, or the values a task function returns) in ``optuna_tell``, the override grammar as Optuna
distributions and the objectives in ``optuna_space``, the results file (best trial or Pareto front) in
``optuna_results`` and its settings and search space checked before the study starts in ``optuna_checks``. Optuna
is imported when a study starts.
"""
