"""``python -m ipuexp --help``: what the tool does, its other commands, the config groups and recipes, wrapped to
the terminal (Hydra's own help, one flag away with ``--hydra-help``, opens with "... is powered by Hydra" and dumps
the whole config)."""
from __future__ import annotations

import textwrap
from typing import List

USAGE = [
    ("python -m ipuexp +recipe=bert_large", "one run of a published configuration"),
    ("python -m ipuexp -m +recipe=bert_large options.gradient_accumulation=256,1024", "a sweep (one run per point)"),
    ("python -m ipuexp model=hf model.hf.config=bert-base-uncased", "a Transformers model (the hf extra)"),
    ("python -m ipuexp model.name=custom model.target=my_model:build", "your own model (my_model.py's build())"),
]
COMMANDS = [
    ("python -m ipuexp.poptorch --system pod4 train.py -- OVERRIDES", "your PopTorch script, unchanged"),
    ("python -m ipuexp.plan +recipe=NAME system=pod64", "the fastest configuration that fits"),
    ("python -m ipuexp.recipes list|import FILE", "Graphcore's and Optimum's configurations as recipes"),
    ("python -m ipuexp.report EXPERIMENT", "a sweep's table and charts, read back from MLflow"),
    ("python -m ipuexp.validate", "predicted against published throughput"),
    ("python -m ipuexp.calibrate FILE.csv --name NAME", "refit on your measured runs; calibration=NAME uses it"),
]


def groups() -> List[tuple]:
    """(group, options) of the packaged config groups, as Hydra composes them."""
    from ipuexp.config.store import CONF_DIR

    out = []
    for folder in sorted(p for p in CONF_DIR.iterdir() if p.is_dir() and not p.name.startswith("_")):
        names = sorted(p.stem for p in folder.glob("*.yaml"))
        if names:
            out.append((folder.name, names))
    return out


def text(width: int = 0) -> str:
    from ipuexp.terminal_table import MIN_WIDTH, terminal_width

    width = width or max(terminal_width(), MIN_WIDTH)  # a pipe without $COLUMNS: 80, as every other output
    out = [textwrap.fill("python -m ipuexp: emulate IPU training of one configuration (or a sweep with -m) and "
                         "record it in MLflow.", width), "", "Usage:"]

    def item(cmd: str, what: str) -> None:
        out.append(textwrap.fill(cmd, width, initial_indent="  ", subsequent_indent="      "))
        out.append(textwrap.fill(what, width, initial_indent="      ", subsequent_indent="      "))

    for cmd, what in USAGE:
        item(cmd, what)
    out += ["", "Other commands (each takes --help):"]
    for cmd, what in COMMANDS:
        item(cmd, what)
    out += ["", "Config groups (group=option; a recipe with +recipe=NAME):"]
    for name, options in groups():
        out.append(textwrap.fill(f"{name}: {', '.join(options)}", width, initial_indent="  ",
                                 subsequent_indent="      "))
    from ipuexp.config.user_recipes import user_recipe_dir

    mine = sorted(p.stem for p in user_recipe_dir().glob("*.yaml"))
    if mine:
        out.append(textwrap.fill(f"your recipes ({user_recipe_dir()}): {', '.join(mine)}", width,
                                 initial_indent="  ", subsequent_indent="      "))
    out += ["", textwrap.fill("Any key can be overridden (options.gradient_accumulation=512); the composed config: "
                              "python -m ipuexp [overrides] --cfg job; Hydra's own flags: python -m ipuexp "
                              "--hydra-help. README.md explains every option.", width)]
    return "\n".join(out)
