"""``python -m ipuexp.recipes``: published configurations as recipes. The command is ``ipuexp.commands.recipes``; this
door runs it, as ``python -m`` would."""
import runpy

if __name__ == "__main__":
    runpy.run_module("ipuexp.commands.recipes", run_name="__main__")
