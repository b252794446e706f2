"""``python -m ipuexp.validate``: the calibration command (``ipuexp.calibration.validate_command``)."""
from __future__ import annotations

import sys

from ipuexp.calibration.validate_command import main

if __name__ == "__main__":
    sys.exit(main())
