"""``python -m ipuexp.poptorch [--ipu NAME] [--system NAME] [--predict-only] [-m] SCRIPT [ARGS...] [-- OVERRIDES...]``:
parse the command line, check the overrides, and run the script as a Hydra job (one job per point with ``-m``)."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

from ipuexp.exit_status import EXIT_INTERRUPTED, fail

if TYPE_CHECKING:
    from ipuexp.config.types import ConfigNode

USAGE = "usage: python -m ipuexp.poptorch [--ipu NAME] [--system NAME] [--predict-only]\n" \
        "                                 [-m] SCRIPT [ARGS...] [-- OVERRIDES...]"

HELP = USAGE + """

Run a PopTorch script unchanged: `import poptorch` is ipuexp.poptorch. The first
model it calls or compiles is captured as PopTorch splits it (Block, BeginBlock,
Stage, PipelinedExecution, ShardedExecution, AutoStage), its Options become
ipuexp's configuration, and the prediction is printed as by `python -m ipuexp`
and tracked in MLflow. Every call then runs with real numerics on this host.

options:
  -h, --help       show this help and exit
  --ipu NAME       the IPU: mk1, mk2 (default) or bow
  --system NAME    the system: pod4, pod16 (default), pod64, pod128, pod256,
                   server16
  --predict-only   stop each job after its prediction
  -m, --multirun   one job per point of the overrides' sweep

SCRIPT [ARGS...]   the script and its own arguments
-- OVERRIDES...    ipuexp keys that override what the script sets, e.g.
                   options.gradient_accumulation=20 (a,b,c sweeps with -m)

example:
  python -m ipuexp.poptorch --system pod4 train.py --epochs 1 \\
      -- options.gradient_accumulation=20"""


@dataclass
class Command:
    script: str
    script_args: List[str] = field(default_factory=list)
    overrides: List[str] = field(default_factory=list)
    predict_only: bool = False
    multirun: bool = False


class UsageError(ValueError):
    pass


def parse(argv: List[str]) -> Command:
    """The command in ``argv`` (flags before the script; the script's arguments up to ``--``; overrides after)."""
    groups: List[str] = []
    predict_only = multirun = False
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        flag = argv[i]
        if flag in ("--ipu", "--system"):
            if i + 1 >= len(argv):
                raise UsageError(f"{flag} needs a value")
            groups.append(f"{flag[2:]}={argv[i + 1]}")
            i += 2
            continue
        if flag.startswith(("--ipu=", "--system=")):
            groups.append(flag[2:])
        elif flag == "--predict-only":
            predict_only = True
        elif flag in ("-m", "--multirun"):
            multirun = True
        else:
            raise UsageError(f"unknown option {flag}")
        i += 1
    if i >= len(argv) or argv[i] == "--":
        raise UsageError("the script to run is missing")
    script, rest = argv[i], argv[i + 1:]
    args, overrides = (rest[:rest.index("--")], rest[rest.index("--") + 1:]) if "--" in rest else (rest, [])
    multirun = multirun or any(o in ("-m", "--multirun") for o in overrides)
    overrides = [o for o in overrides if o not in ("-m", "--multirun")]
    if not Path(script).is_file():
        raise UsageError(f"no such script: {script}")
    return Command(script, args, groups + overrides, predict_only, multirun)


def _wants_help(argv: List[str]) -> bool:
    """No arguments, or -h/--help among the flags before the script."""
    i = 0
    while i < len(argv):
        if argv[i] in ("-h", "--help"):
            return True
        if not argv[i].startswith("-") or argv[i] == "--":
            return False
        i += 2 if argv[i] in ("--ipu", "--system") else 1
    return not argv


def answer_early(argv: List[str]) -> None:
    """The help, or a usage error, of ``python -m ipuexp.poptorch``: answered as the package starts to load, before
    torch is imported (seconds), since neither needs it. Any other command line returns."""
    if _wants_help(argv):
        print(HELP)
        sys.exit(0)
    try:
        parse(argv)
    except UsageError as err:
        print(f"{USAGE}\nipuexp.poptorch: {err}", file=sys.stderr)
        sys.exit(2)


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
