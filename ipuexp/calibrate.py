"""``python -m ipuexp.calibrate``: refit the calibration on runs you measured. The command is
``ipuexp.commands.calibrate``; this door runs it (``runpy``: the process is still the door's ``__main__``, its
``sys.argv`` unchanged)."""
import runpy

if __name__ == "__main__":
    runpy.run_module("ipuexp.commands.calibrate", run_name="__main__")
