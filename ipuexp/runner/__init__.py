"""Where jobs run: Hydra multirun sweeps on Ray or in this process (``hydra/launcher=ipuexp``, ``ray``).

``placement`` decides where a sweep runs; ``sweep`` dispatches a batch of jobs from the driver to Ray, ``worker``
runs one in a Ray worker, ``cluster`` starts or joins Ray, ``in_process`` runs a batch here; ``compose`` composes a
job's configuration, ``captures`` shares one graph capture per model across a sweep; ``tally`` keeps a sweep's points
over its batches and ``summary`` prints its end-of-sweep table. Which points a sweep has is ``ipuexp.sweeps``'s
(the basic and Optuna sweepers); the Hydra plugin classes themselves are in ``hydra_plugins/ipuexp/``.
"""
