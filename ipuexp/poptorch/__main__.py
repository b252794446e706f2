"""``python -m ipuexp.poptorch``: run a PopTorch script on ipuexp. The command is ``ipuexp.commands.poptorch``; this
door runs it, as ``python -m`` would."""
import runpy

if __name__ == "__main__":
    runpy.run_module("ipuexp.commands.poptorch", run_name="__main__")
