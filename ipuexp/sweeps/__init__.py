"""Choosing the points of a sweep: what ipuexp's Hydra sweepers do, apart from Hydra's plugin interface (whose thin
classes are in ``hydra_plugins/ipuexp``). The runner (``ipuexp.runner``) runs the points they choose.

``basic`` is the basic sweeper (``hydra/sweeper=ipuexp``, the default): Hydra's grid, every batch run, one summary
at the end. The Optuna sweeper (``hydra/sweeper=optuna``) has its settings in ``optuna_config``, its study (storage,
resume, ask and tell) in ``optuna_study``, Hydra's override grammar as Optuna distributions and the objectives in
``optuna_space``, the results file (best trial or Pareto front) in ``optuna_results`` and its settings and search
space checked before the study starts in ``optuna_checks``. Optuna is imported when a study starts.
"""
