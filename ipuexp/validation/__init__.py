"""The calibration command, ``python -m ipuexp.validate``: predicted against published throughput for every row of
the calibration table, the fit of the calibration constants and the held-out refits.

``command`` is the command (settings, the report, the gates), ``fit`` the fit and the held-out refits, ``report``
the per-row outcomes and their statistics, ``notes`` the calibration blocks written into ``conf/ipu/*.yaml`` and the
plot.
"""
