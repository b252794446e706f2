"""``python -m ipuexp.validate``: the calibration against published throughput. The command is
``ipuexp.commands.validate``; this door runs it (``runpy``: the process is still the door's ``__main__``, its
``sys.argv`` unchanged)."""
import runpy

if __name__ == "__main__":
    runpy.run_module("ipuexp.commands.validate", run_name="__main__")
