"""The chosen candidate as a user recipe (``--write-recipe NAME``): it extends the recipe the plan started from
and sets only the values that differ, each commented with the value it replaces.

Before it is written, the recipe is composed from a scratch folder exactly as ``+recipe=NAME`` will compose it,
and must give the configuration the planner evaluated; otherwise nothing is written.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ipuexp.config.errors import ConfigError
from ipuexp.config.schema import ExperimentConfig
from ipuexp.emulator.oom import human
from ipuexp.plan.candidate import apply, differences, value_text
from ipuexp.plan.evaluate import Outcome
from ipuexp.plan.planner import Plan

SECTIONS = ("model", "data", "options", "optimizer", "engine", "training", "system", "ipu")
"""Sections compared with the base recipe, in the order the packaged recipes write them."""


def _tree(exp: ExperimentConfig) -> Dict[str, Any]:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.structured(exp), resolve=True, enum_to_str=True)


def changed(mine: Mapping[str, Any], theirs: Mapping[str, Any], prefix: str = "") -> List[Tuple[str, Any, Any]]:
    """(dotted key, value in ``mine``, value in ``theirs``) of every leaf that differs (a list is one leaf)."""
    out = []
    for key, value in mine.items():
        other = theirs.get(key) if isinstance(theirs, Mapping) else None
        if isinstance(value, Mapping) and isinstance(other, Mapping):
            out += changed(value, other, f"{prefix}{key}.")
        elif value != other:
            out.append((f"{prefix}{key}", value, other))
    return out


def _nest(leaves: List[Tuple[str, Any, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value, _ in leaves:
        *parents, last = key.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return out


def _base_config(plan: Plan) -> Optional[ExperimentConfig]:
    """The base recipe alone on the plan's system and chip (what the ``defaults`` of the written recipe give)."""
    from ipuexp.config.compose import load_experiment

    if not plan.base.recipe:
        return None
    return load_experiment(f"+recipe={plan.base.recipe}", f"system={plan.base.system.name}",
                           f"ipu={plan.base.ipu.name}")


def recipe_parts(plan: Plan, best: Outcome, name: str) -> Tuple[Dict[str, Any], Dict[str, str], List[str]]:
    """(body, line comments, header) of recipe ``name`` running ``best``."""
    exp = apply(plan.base, best.candidate)
    mine = _tree(exp)
    base = _base_config(plan)
    system, ipu = exp.system.name, exp.ipu.name
    if base is not None:
        defaults: List[Any] = [f"/recipe/{plan.base.recipe}", {"override /system": system}, {"override /ipu": ipu}]
        leaves = [leaf for s in SECTIONS for leaf in changed({s: mine[s]}, {s: _tree(base)[s]})]
        was = plan.base.recipe
    else:  # composed without a recipe: every section, on the schema's defaults
        defaults = [{"override /system": system}, {"override /ipu": ipu}]
        leaves = [(f"{s}.{k}", v, None) for s in SECTIONS[:6] for k, v in mine[s].items()]
        was = None
    body: Dict[str, Any] = {"defaults": defaults, "recipe": name}
    body.update(_nest(leaves))
    comments = {key: f"planned; {was}: {value_text(theirs)}" for key, _, theirs in leaves if was}
    p = plan.problem
    changes = " ".join(differences(best.candidate, p.recipe)) or "none"
    band = f" (±{best.band_pct:.0f}%)" if best.band_pct is not None else ""
    header = [f"Planned by python -m ipuexp.plan from recipe {plan.base.recipe or plan.base.model.name} on "
              f"{system} ({p.num_ipus} IPUs), global batch {p.global_batch:,}, {plan.settings.headroom:.0%} "
              "tile headroom.",
              f"Predicted {best.samples_per_s:,.0f}{band} samples/s (the recipe: "
              f"{plan.result.recipe.samples_per_s:,.0f}); fullest tile {human(best.peak_tile_bytes)} on IPU "
              f"{best.peak_tile_ipu} ({best.tile_headroom:.0%} free); fullest IPU {human(best.peak_ipu_bytes)} on "
              f"IPU {best.peak_ipu} ({best.ipu_headroom:.0%} free).",
              f"Changes from the recipe's searched options: {changes}"]
    return body, comments, header


def check_name(name: str, overwrite: bool = False) -> Path:
    """Where recipe ``name`` goes; a bad, packaged or (without ``overwrite``) taken name is a ConfigError, so the
    command refuses it before it searches."""
    from ipuexp.config.store import recipe_names
    from ipuexp.config.user_recipes import recipe_path, write_recipe

    path = recipe_path(name, recipe_names())
    if path.exists() and not overwrite:
        write_recipe(name, {}, overwrite=False)  # raises the one-line "exists" error
    return path


def write_best_recipe(plan: Plan, best: Outcome, name: str, overwrite: bool = False) -> Path:
    """Write ``best`` as user recipe ``NAME`` (``config.user_recipes``); returns its path. A bad or taken name is a
    ConfigError; so is a recipe that would not compose to the configuration the planner evaluated."""
    from ipuexp.config.user_recipes import compose_draft, write_recipe

    check_name(name, overwrite)
    body, comments, header = recipe_parts(plan, best, name)
    composed = compose_draft(name, body, header, comments)
    want = apply(plan.base, best.candidate)
    drift = changed({s: _tree(composed)[s] for s in SECTIONS}, {s: _tree(want)[s] for s in SECTIONS})
    if drift:
        key, got, expected = drift[0]
        raise ConfigError(key, got, f"the written recipe composes to this, the plan evaluated {expected!r}; "
                          "allowed: a recipe that composes to the planned configuration")
    return write_recipe(name, body, header, overwrite=overwrite, comments=comments)
