"""``python -m ipuexp.calibrate``: refit the calibration on runs you measured. The command is ``ipuexp.commands.calibrate``; this door runs it, as ``python -m`` would."""
import runpy

if __name__ == "__main__":
    runpy.run_module("ipuexp.commands.calibrate", run_name="__main__", alter_sys=True)
