"""``python -m ipuexp.validate``: the calibration command (``ipuexp.validation.command``)."""
from __future__ import annotations

import sys

from ipuexp.validation.command import main

if __name__ == "__main__":
    sys.exit(main())
