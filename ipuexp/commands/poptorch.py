"""``python -m ipuexp.poptorch [--ipu NAME] [--system NAME] [--predict-only] [-m] SCRIPT [ARGS...] [-- OVERRIDES...]``:
parse the command line, check the overrides, and run the script as a Hydra job (one job per point with ``-m``)."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

from ipuexp.exit_status import EXIT_INTERRUPTED, fail

if TYPE_CHECKING:
    from ipuexp.config.types import ConfigNode

from ipuexp.poptorch.command_line import HELP, USAGE, Command, UsageError, _wants_help, parse  # noqa: F401


def main(argv: Optional[List[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if _wants_help(argv):
        print(HELP)
        return
    try:
        cmd = parse(argv)
    except UsageError as err:
        print(f"{USAGE}\nipuexp.poptorch: {err}", file=sys.stderr)
        sys.exit(2)
    _check(cmd)
    from ipuexp.poptorch.run_script import ScriptFailed

    try:
        _hydra_entry(cmd)
    except ScriptFailed as failed:
        sys.exit(failed.code)
    except KeyboardInterrupt:
        sys.exit(fail("ipuexp.poptorch", "interrupted", EXIT_INTERRUPTED))


def _check(cmd: Command) -> None:
    """Compose every swept value once before the script runs: a key or value ipuexp rejects is one line. Where the
    job writes (its run or sweep folder, the tracking store) is checked then too, not after the script's work."""
    from ipuexp.commands.run import EXIT_CONFIG_ERROR, check_outputs, preflight, sweep_points
    from ipuexp.config.errors import ConfigError

    try:
        for n, point in enumerate(sweep_points(cmd.overrides) if cmd.multirun else [cmd.overrides]):
            cfg = preflight(point, rules=False)
            if n == 0:
                check_outputs(cfg, cmd.multirun)
            if n == 0 and cmd.multirun:
                from ipuexp.runner.ray_probe import check_ray

                check_ray(cfg)
    except ConfigError as err:
        sys.exit(fail("ipuexp", f"config error: {err}", EXIT_CONFIG_ERROR))


def _remove_bare(folder: Path) -> None:
    """Remove a run folder that holds only what Hydra put there (its ``.hydra`` and the log), and the folders above
    it that it leaves empty, up to the launch folder: a script refused before its prediction leaves nothing."""
    import shutil

    if not folder.is_dir() or {p.name for p in folder.iterdir()} - {".hydra", "poptorch.log"}:
        return
    shutil.rmtree(folder, ignore_errors=True)
    here = Path.cwd().resolve()
    parent = folder.resolve().parent
    while parent != here and here in parent.parents and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def _hydra_entry(cmd: Command) -> None:
    import hydra

    from ipuexp.config.store import CONF_PATH, register

    register()

    @hydra.main(version_base=None, config_path=CONF_PATH, config_name="config")
    def _job(cfg: ConfigNode) -> object:
        from hydra.core.hydra_config import HydraConfig

        from ipuexp.app import sweep_return
        from ipuexp.poptorch.run_script import ScriptFailed, run
        from ipuexp.poptorch.session import Session
        from ipuexp.result import Skipped

        hc = HydraConfig.get()
        job = Session(cfg, list(hc.overrides.task), Path(hc.runtime.output_dir), cmd.predict_only)
        try:
            result = run(cmd.script, cmd.script_args, job)
        except ScriptFailed as failed:
            if cmd.multirun:
                raise  # this point fails; the sweep goes on
            if failed.code == 2 and not job.predicted:  # a refused option or API: nothing of a run to keep
                _remove_bare(Path(hc.runtime.output_dir))
            sys.exit(failed.code)  # reported already: no traceback of ipuexp's
        # The script ran in the launch folder (hydra.job.chdir=false); what a job leaves for its sweeper goes into
        # the job's own folder, as for python -m ipuexp.
        here = os.getcwd()
        os.chdir(hc.runtime.output_dir)
        try:
            return sweep_return(result if result is not None else Skipped())
        finally:
            os.chdir(here)

    # The script's name is the MLflow experiment of its jobs and of a sweep's parent run, unless the command names one.
    experiment = [] if any(o.lstrip("+~").startswith("tracking.experiment=") for o in cmd.overrides) else \
        [f"tracking.experiment={Path(cmd.script).stem}"]
    hydra_args = (["-m"] if cmd.multirun else []) + ["hydra.job.chdir=false", "hydra.job.name=poptorch"] + \
        experiment + cmd.overrides
    saved = sys.argv
    sys.argv = [sys.argv[0]] + hydra_args
    try:
        _job()
    finally:
        sys.argv = saved


if __name__ == "__main__":
    main()
