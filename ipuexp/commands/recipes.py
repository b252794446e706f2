"""``python -m ipuexp.recipes import FILE[:CONFIG] --name NAME`` writes ``./recipes/NAME.yaml`` (or
``$IPUEXP_RECIPE_DIR``), usable at once as ``+recipe=NAME``; ``python -m ipuexp.recipes list FILE`` names the
configurations of a file.

FILE is a configuration file of Graphcore's example applications or MLPerf submissions (CONFIG picks one of its
named configurations), or an Optimum Graphcore ``ipu_config.json`` applied to ``--base RECIPE``. A key ipuexp
cannot map is refused on one line (exit 2); keys that change nothing the emulator predicts are listed in one
warning line.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Tuple

from ipuexp.exit_status import EXIT_BAD_INPUT, fail

EXIT_REFUSED = EXIT_BAD_INPUT


def _split(spec: str) -> Tuple[str, Optional[str]]:
    """``FILE[:CONFIG]``: the part after the last ``:`` is a configuration name unless it looks like a path."""
    path, sep, config = spec.rpartition(":")
    if sep and path and "/" not in config and not Path(spec).exists():
        return path, config
    return spec, None


def _public_locator(path: Path) -> Optional[str]:
    """``owner/repo@commit:relative/path`` when the file is in a git checkout with a GitHub remote."""
    try:
        root = subprocess.run(["git", "-C", str(path.parent), "rev-parse", "--show-toplevel"], capture_output=True,
                              text=True, check=True).stdout.strip()
        commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
        remote = subprocess.run(["git", "-C", root, "remote", "get-url", "origin"], capture_output=True, text=True,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    if "github.com" not in remote:
        return None
    repo = remote.split("github.com", 1)[1].lstrip(":/").removesuffix(".git")
    return f"{repo}@{commit}:{path.resolve().relative_to(Path(root).resolve()).as_posix()}"


def _optimum_draft(path: Path, args: argparse.Namespace, locator: str):
    from ipuexp.config.compose import compose_recipe
    from ipuexp.config import ipu_config as optimum
    from ipuexp.config import ipu_config_releases as releases
    from ipuexp.importers.mapping import SYSTEM_NAMES, Draft, refuse
    from ipuexp.models import zoo_layers

    if not args.base:
        raise refuse("--base", None, "allowed: the packaged or user recipe whose model the ipu_config.json runs "
                     "(e.g. --base bert_large)")
    base = compose_recipe(args.base)
    fields, warnings = optimum.read(path)
    pod_type = args.pod_type or (fields.get("pod_type") if isinstance(fields.get("pod_type"), str) else None) \
        or base.system.name
    if pod_type not in SYSTEM_NAMES:
        raise refuse("pod_type", pod_type, f"allowed: {', '.join(n for n in optimum.POD_TYPES if n in SYSTEM_NAMES)} "
                     "(the POD types ipuexp has a system for)")
    dm = base.options.pipeline.device_mapping
    release = args.optimum_graphcore
    releases.parse(release, "--optimum-graphcore")
    values, notes, unmodelled = optimum.options(fields, pod_type, zoo_layers(base.model),
                                                list(dm) if dm is not None else None, release=release)
    line = releases.defaults_line(path, fields, release, f"--optimum-graphcore {releases.LAST}")
    warnings = warnings + ([line] if line else [])
    draft = Draft(source=locator, title=f"Optimum Graphcore ipu_config.json on recipe {args.base}", values=values,
                  notes=notes, unmodelled=unmodelled, warnings=warnings, system=pod_type)
    return draft


def _resolve(file: str) -> Tuple[Path, Optional[str]]:
    """The file to read and, for a file not here that ipuexp ships a copy of, that copy's public locator."""
    path = Path(file)
    if path.exists():
        return path, None
    from ipuexp.importers.shipped import shipped_copy

    found = shipped_copy(file)
    if found is None:
        return path, None
    copy, locator = found
    print(f"ipuexp.recipes: {file} is not here: reading ipuexp's copy of {locator}", file=sys.stderr)
    return copy, locator


def cmd_import(args: argparse.Namespace) -> int:
    from ipuexp.importers import read
    from ipuexp.importers.recipe import write

    file, config = _split(args.spec)
    path, shipped = _resolve(file)
    locator = args.source or shipped or _public_locator(path) or file
    if path.suffix == ".json" and args.base:
        draft = _optimum_draft(path, args, locator)
    else:
        draft = read(path, config, locator if args.source else None)
        if not args.source:
            draft.source = f"{locator}#{draft.source.partition('#')[2]}" if "#" in draft.source else locator
    if args.ipu:
        draft.ipu = args.ipu
    if args.system:
        draft.system = args.system
    written, exp = write(draft, args.name, base=args.base if path.suffix == ".json" else None,
                         overwrite=args.overwrite)
    for line in draft.warnings:
        print(f"ipuexp.recipes: warning: {line}", file=sys.stderr)
    if draft.unmodelled:
        from ipuexp.importers.mapping import one_line

        print(f"ipuexp.recipes: warning: not modelled (no effect on the prediction): {one_line(draft.unmodelled)}",
              file=sys.stderr)
    opts = exp.options
    # Where the user stands: a path under the working folder as ./..., anything else in full.
    rel = os.path.relpath(written)
    print(f"wrote {str(written) if rel.startswith('..') else os.path.join('.', rel)} from {draft.source}")
    model = f"{exp.model.hf.config} ({exp.model.hf.task})" if exp.model.name == "hf" else \
        f"{exp.model.name}-{exp.model.size}"
    split = "layer halves (attention, feed-forward) per stage" if opts.pipeline.split_layers else "layers per IPU"
    packed = exp.data.packing
    packs = (f", packs of up to {packed.max_sequences_per_pack} sequences ({packed.avg_sequences_per_pack:g} on "
             "average)") if packed.max_sequences_per_pack > 1 else ""
    clauses = [f"model {model}", f"micro-batch {exp.data.micro_batch_size}", *([packs[2:]] if packs else []),
               f"{opts.replication_factor} replicas",
               f"{split} [{','.join(str(n) for n in opts.pipeline.layers_per_ipu)}]",
               f"gradient accumulation {opts.gradient_accumulation}", f"system {exp.system.name}"]
    print(_clause_lines(clauses, max(shutil.get_terminal_size((120, 24)).columns, 40)))
    print(f"run it: python -m ipuexp +recipe={args.name}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from ipuexp.importers import names

    for name in names(_resolve(args.file)[0]):
        print(name)
    return 0


def _clause_lines(clauses: List[str], width: int) -> str:
    """The clauses joined by commas, lines broken only between clauses (a figure stays with its name)."""
    lines: List[str] = []
    line = "  "
    for n, clause in enumerate(clauses):
        text = clause + ("," if n < len(clauses) - 1 else "")
        if line.strip() and len(line) + 1 + len(text) > width:
            lines.append(line)
            line = "    " + text
        else:
            line = f"{line} {text}" if line.strip() else line + text
    lines.append(line)
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ipuexp.recipes", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="write a recipe from a published configuration")
    imp.add_argument("spec", metavar="FILE[:CONFIG]")
    imp.add_argument("--name", required=True, help="recipe name (+recipe=NAME)")
    imp.add_argument("--base", help="ipu_config.json: the recipe whose model and other settings it runs")
    imp.add_argument("--pod-type", help="ipu_config.json: the POD type that picks per-POD-type values")
    imp.add_argument("--optimum-graphcore", metavar="RELEASE",
                     help="ipu_config.json: the Optimum Graphcore release whose IPUConfig defaults fill the fields "
                          "the file leaves out (default: the first release's)")
    imp.add_argument("--source", help="public locator of FILE (repository@commit:path), cited in the recipe")
    imp.add_argument("--ipu", choices=("mk1", "mk2", "bow"), help="IPU generation (default mk2)")
    imp.add_argument("--system", help="system (default: the smallest POD that holds the run)")
    imp.add_argument("--force", "--overwrite", dest="overwrite", action="store_true",
                     help="replace an existing recipe of that name in the recipe folder")
    lst = sub.add_parser("list", help="the configurations a file holds")
    lst.add_argument("file")
    args = parser.parse_args(argv)

    from ipuexp.config.errors import ConfigError

    try:
        sys.exit(cmd_import(args) if args.command == "import" else cmd_list(args))
    except ConfigError as err:
        what = f"cannot import {args.spec}" if args.command == "import" else f"cannot read {args.file}"
        sys.exit(fail("ipuexp.recipes", f"{what}: {err}", EXIT_REFUSED))
    except OSError as err:  # a file that cannot be read: one line, no traceback
        name = args.spec if args.command == "import" else args.file
        sys.exit(fail("ipuexp.recipes", f"cannot read {_split(name)[0]}: {err.strerror or err}", EXIT_REFUSED))


if __name__ == "__main__":
    main()

