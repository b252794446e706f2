"""The command line of ``python -m ipuexp.poptorch``: its help, its parse, and the answers it gives before torch is
imported (the help and usage errors, which the package's ``__init__`` gives as it starts to load). Torch-free, and
free of the commands layer above it (``ipuexp.commands.poptorch`` runs the command)."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List

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
