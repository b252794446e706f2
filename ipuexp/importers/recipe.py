"""A draft as a recipe in the user's recipe folder, checked by composing it exactly as ``+recipe=NAME`` does."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ipuexp.importers.mapping import Draft, nested, one_line, system_for

# The order of the sections in a written recipe (as in the packaged ones).
SECTIONS = ("model", "data", "options", "optimizer", "host", "engine", "training")


def body(draft: Draft, name: str, base: Optional[str] = None) -> Tuple[Dict[str, Any], Dict[str, str], List[str]]:
    """The recipe's body, its line comments and its header lines."""
    system = draft.system or _system(draft)
    defaults: List[Any] = [f"/recipe/{base}"] if base else [{"override /ipu": draft.ipu}]
    defaults.append({"override /system": system})
    out: Dict[str, Any] = {"defaults": defaults, "recipe": name, "source": draft.source}
    tree = nested(draft.values)
    for section in SECTIONS:
        if section in tree:
            out[section] = tree[section]
    header = [f"{draft.title}: {draft.source}", "Written by python -m ipuexp.recipes import; each value's comment "
              "names the key it came from, or the application's default."]
    if draft.unmodelled:
        header.append(f"Not modelled (no effect on the prediction): {one_line(draft.unmodelled)}.")
    return out, dict(draft.notes), header


def _system(draft: Draft) -> str:
    from ipuexp.config.pipeline import ipus_per_replica

    lpi = draft.values.get("options.pipeline.layers_per_ipu") or []
    dm = draft.values.get("options.pipeline.device_mapping")
    replicas = draft.values.get("options.replication_factor", 1)
    return system_for(replicas * ipus_per_replica(lpi, dm))


def write(draft: Draft, name: str, base: Optional[str] = None, overwrite: bool = False) -> Tuple[Path, Any]:
    """Check the recipe by composing and validating it from a scratch folder, then write it to the user's recipe
    folder. Returns the path and the validated ExperimentConfig; a value ipuexp rejects raises its ConfigError."""
    from ipuexp.config.user_recipes import compose_draft, recipe_path, user_recipe_dir, write_recipe
    from ipuexp.config.store import recipe_names

    recipe_path(name, recipe_names())  # a bad or packaged name fails before anything is composed
    target = user_recipe_dir()
    if (target / f"{name}.yaml").exists() and not overwrite:
        write_recipe(name, {}, overwrite=False)  # raises the one-line "exists" error
    data, comments, header = body(draft, name, base)
    exp = compose_draft(name, data, header, comments)
    return write_recipe(name, data, header, overwrite=overwrite, comments=comments), exp
