"""``python -m ipuexp.plan +recipe=NAME [overrides] [plan.KEY=VALUE ...]``: the fastest configuration that fits.

Overrides compose the experiment exactly as ``python -m ipuexp`` does (``system=pod64``, ``ipu=bow``, any
option); ``plan.*`` keys set the search (``ipuexp.plan.settings.PlanConfig``). A bad value is one line naming
the key, the value and what is allowed (exit 2); a problem with no fitting configuration ends with one line
saying what is short, and by how much (exit 1).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, List, Optional, Tuple

from ipuexp.exit_status import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, fail

EXIT_CONFIG_ERROR = EXIT_BAD_INPUT
EXIT_INFEASIBLE = EXIT_FAILED


def split_overrides(args: List[str]) -> Tuple[List[str], List[str]]:
    """(experiment overrides, ``plan.*`` overrides without their prefix)."""
    plan = [a[len("plan."):] for a in args if a.startswith("plan.")]
    return [a for a in args if not a.startswith("plan.")], plan


def settings_of(overrides: List[str]):
    """The PlanConfig of ``plan.*`` overrides; a wrong key or type is a ConfigError."""
    from omegaconf import OmegaConf

    from ipuexp.config.errors import ConfigError, from_omegaconf
    from ipuexp.plan.settings import PlanConfig, check

    try:
        cfg = OmegaConf.merge(OmegaConf.structured(PlanConfig), OmegaConf.from_dotlist(overrides))
    except Exception as exc:  # OmegaConf names the key; prefix it as the user typed it
        err = from_omegaconf(exc, dict(o.split("=", 1) for o in overrides if "=" in o))
        raise ConfigError(f"plan.{err.key}", err.value, err.allowed) from None
    return check(OmegaConf.to_object(cfg))


def wrap(text: str) -> str:
    """A line of the plan's end, between words at the terminal's width; a path stays whole, on a line of its own if
    need be."""
    import textwrap

    from ipuexp.terminal_table import MIN_WIDTH, terminal_width

    return textwrap.fill(text, max(terminal_width(), MIN_WIDTH), subsequent_indent="    ", break_long_words=False,
                         break_on_hyphens=False)


def _plain(text: str) -> str:
    """Docstring text as a terminal shows it: without reST's ``code`` and :role:`name` marks."""
    import re

    return re.sub(r"(:\w+:)?`+([^`]+)`+", r"\2", text)


def parse(argv: List[str]) -> argparse.Namespace:
    import textwrap

    from ipuexp.plan.settings import documented_keys
    from ipuexp.terminal_table import MIN_WIDTH, terminal_width

    width = max(terminal_width(), MIN_WIDTH)
    description = textwrap.fill(_plain(" ".join(__doc__.split("\n\n")[0].split())), width)
    lines = ["plan.* keys (plan.KEY=VALUE; default in brackets):"]
    for key, default, doc in documented_keys():
        lines += textwrap.wrap(_plain(f"{key} [{default}]: {doc}"), width=width, initial_indent="  ",
                               subsequent_indent="      ", break_on_hyphens=False)
    # argparse wraps the usage and the flags' help to $COLUMNS; the description and the keys are wrapped here.
    os.environ.setdefault("COLUMNS", str(width))
    parser = argparse.ArgumentParser(prog="python -m ipuexp.plan", description=description,
                                     epilog="\n".join(lines), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="+recipe=NAME, config overrides, plan.KEY=VALUE")
    parser.add_argument("--write-recipe", metavar="NAME", help="write the best configuration as recipe NAME "
                        "(./recipes/NAME.yaml or $IPUEXP_RECIPE_DIR), usable as +recipe=NAME")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing recipe of that name")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return parser.parse_intermixed_args(argv)  # flags may come after the overrides


def main(argv: Optional[List[str]] = None) -> int:
    args = parse(list(sys.argv[1:] if argv is None else argv))
    from ipuexp.config.compose import load_experiment
    from ipuexp.config.errors import ConfigError

    exp_overrides, plan_overrides = split_overrides(args.overrides)
    try:
        settings = settings_of(plan_overrides)
        base = load_experiment(*exp_overrides)
        if args.write_recipe:
            from ipuexp.plan.recipe import check_name

            check_name(args.write_recipe, args.overwrite)
        if settings.out_dir:
            # A folder the plan cannot write into is found now, not after the search.
            from ipuexp.config.checks import check_writable

            check_writable("plan.out_dir", settings.out_dir)
        if base.tracking.enabled:  # the store is opened aside while the search runs: a store that is not there
            from ipuexp.tracking.probe import check_store  # is found now
            from ipuexp.tracking.store import tracking_uri

            check_store("tracking.uri", base.tracking.uri or tracking_uri(base), tracking_uri(base),
                        float(base.tracking.timeout_s))
    except ConfigError as err:
        return fail("ipuexp.plan", f"config error: {err}", EXIT_CONFIG_ERROR)
    run = None
    if base.tracking.enabled:
        from ipuexp.plan.tracking import PlanRun

        run = PlanRun(base, settings, args.overrides)
    try:
        return _plan(args, base, settings, run)
    except ConfigError as err:
        _fail(run, f"config error: {err}")
        return fail("ipuexp.plan", f"config error: {err}", EXIT_CONFIG_ERROR)
    except KeyboardInterrupt:
        _fail(run, "interrupted")
        return fail("ipuexp.plan", "interrupted", EXIT_INTERRUPTED)
    except BaseException as exc:
        _fail(run, f"{type(exc).__name__}: {exc}")
        raise


def _fail(run: Any, reason: str) -> None:
    if run is not None and not run.ended:
        run.fail(reason)


def _plan(args: argparse.Namespace, base: Any, settings: Any, run: Any) -> int:
    """Search, print, write the files (and the recipe), record the MLflow runs; the exit status."""
    from ipuexp.plan import ranking
    from ipuexp.plan.output import distinct, print_plan, shortfall_line, write_outputs
    from ipuexp.plan.planner import plan as run_plan

    result = run_plan(base, settings, quiet=args.quiet)
    top = distinct(result.ranked, settings.top_k, result.problem.recipe)
    rejected = distinct(ranking.rejected(result.result.outcomes, top[0] if top else None, 50), 3,
                        result.problem.recipe)
    print_plan(result, top, rejected)
    from ipuexp.plan.settings import run_folder

    folder = run_folder(settings.out_dir)
    paths = write_outputs(result, top, rejected, folder)
    print(wrap(f"Wrote {paths['plan'].name} and {paths['pareto'].name} to {folder}{os.sep}"))
    shortfall = None if top else shortfall_line(ranking.closest(result.result.outcomes), result)
    if args.write_recipe and top:
        from ipuexp.plan.recipe import write_best_recipe

        path = write_best_recipe(result, top[0], args.write_recipe, overwrite=args.overwrite)
        paths["recipe"] = path
        print(wrap(f"Wrote recipe {path}: run it with python -m ipuexp +recipe={args.write_recipe}"))
    if run is not None:
        run.finish(result, top, paths, failure=shortfall)
        print(wrap(f"MLflow run {run.run_id} in experiment {run.experiment_name!r} (see it with mlflow ui)"))
    if shortfall:
        return fail("ipuexp.plan", f"{shortfall}", EXIT_INFEASIBLE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
