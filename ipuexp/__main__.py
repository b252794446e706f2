"""``python -m ipuexp``: compose the Hydra config, check it, run the job, track it. The command is ``ipuexp.commands.run``; this door runs it, as ``python -m`` would."""
import runpy

if __name__ == "__main__":
    runpy.run_module("ipuexp.commands.run", run_name="__main__", alter_sys=True)
