"""The classes Hydra discovers in ipuexp: the launchers (``hydra/launcher=ipuexp``, ``ray``: ``ray_launcher``, with
their settings and the basic sweeper's in ``config``), the sweepers (``hydra/sweeper=ipuexp``: ``sweeper``;
``hydra/sweeper=optuna``: ``optuna_sweeper``; who answers ``optuna`` beside hydra-optuna-sweeper: ``optuna_name``),
which hand the choice of points to ``ipuexp.sweeps``, and the user's recipe folder as a config source
(``recipes_source``).

Hydra imports every module under ``hydra_plugins`` when it starts, so the modules here import nothing heavy at
module level: Ray, Optuna and MLflow are imported when a sweep is launched.
"""
