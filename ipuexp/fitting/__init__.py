"""The calibration's constants fitted on the engine: the fit over the calibration table and its held-out refits
(``fit``), a user's measured runs (``measured_runs``) and the refit on them (``refit``), each row's outcome and their
statistics (``validate_report``). The table, the fitted ranges, the bands and the reach they are read from are
``ipuexp.calibration``'s, below the configuration."""
