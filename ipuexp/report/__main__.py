"""``python -m ipuexp.report``: a sweep's runs read back from MLflow. The command is ``ipuexp.commands.report``; this
door runs it, as ``python -m`` would."""
import runpy

if __name__ == "__main__":
    runpy.run_module("ipuexp.commands.report", run_name="__main__")
