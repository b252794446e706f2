"""``python -m ipuexp.validate``: the calibration against published throughput. The command is ``ipuexp.commands.validate``; this door runs it, as ``python -m`` would."""
import runpy

if __name__ == "__main__":
    runpy.run_module("ipuexp.commands.validate", run_name="__main__", alter_sys=True)
