"""``python -m ipuexp.plan``: the fastest configuration that fits. The command is ``ipuexp.commands.plan``; this door
runs it, as ``python -m`` would."""
import runpy

if __name__ == "__main__":
    runpy.run_module("ipuexp.commands.plan", run_name="__main__")
