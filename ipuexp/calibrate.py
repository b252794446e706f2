"""``python -m ipuexp.calibrate``: refit the calibration on runs you measured (``ipuexp.calibration.calibrate_command``)."""
from __future__ import annotations

import sys

from ipuexp.calibration.calibrate_command import main

if __name__ == "__main__":
    sys.exit(main())
