"""What a user types: each ``python -m ipuexp...`` command parses its command line, checks it, calls the library
and prints, one module per command (``run``: ``python -m ipuexp``; ``plan``, ``validate``, ``calibrate``,
``report``, ``recipes``, ``poptorch``). The packages' ``__main__`` modules and ``ipuexp/validate.py`` and
``ipuexp/calibrate.py`` are only doors that run them. Bad input is one line on stderr, exit status 2
(``ipuexp.runner.errors`` holds the statuses every command shares)."""
