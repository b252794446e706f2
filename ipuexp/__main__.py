"""``python -m ipuexp``: compose the Hydra config, check it, run the job, track it. The command is
``ipuexp.commands.run``; this door runs it (``runpy``: the process is still the door's ``__main__``, its
``sys.argv`` unchanged)."""
import runpy

if __name__ == "__main__":
    runpy.run_module("ipuexp.commands.run", run_name="__main__")
