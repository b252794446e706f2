"""The user's own recipes: YAML files in a folder of the launch directory, selected as ``+recipe=NAME``.

Recipes written by ``python -m ipuexp.recipes import`` and ``python -m ipuexp.plan --write-recipe`` go to
``./recipes/NAME.yaml`` (or ``$IPUEXP_RECIPE_DIR``). Hydra finds them through the ``ipuexp-recipes://`` config
source (``hydra_plugins/ipuexp/recipes_source.py``), after the package's own recipes, so a packaged name cannot be
shadowed: writing one is refused instead.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence

from ipuexp.config.errors import ConfigError

ENV_VAR = "IPUEXP_RECIPE_DIR"
DEFAULT_DIR = "recipes"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def user_recipe_dir() -> Path:
    """``$IPUEXP_RECIPE_DIR``, else ``./recipes`` of the current directory (absolute)."""
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser().resolve() if env else (Path.cwd() / DEFAULT_DIR).resolve()


def user_recipe_names() -> list[str]:
    folder = user_recipe_dir()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def recipe_path(name: str, packaged: Sequence[str]) -> Path:
    """Where recipe ``name`` is written; a bad or packaged name is a ConfigError."""
    if not _NAME.match(name):
        raise ConfigError("recipe name", name, "not allowed; allowed: letters, digits, '_' and '-', "
                          "starting with a letter or '_'")
    if name in packaged:
        raise ConfigError("recipe name", name, f"a packaged recipe; allowed: a name not in {', '.join(packaged)}")
    return user_recipe_dir() / f"{name}.yaml"


def render_recipe(body: Mapping[str, Any], header: Sequence[str] = (),
                  comments: Optional[Mapping[str, str]] = None) -> str:
    """The YAML text of a recipe: Hydra's global-package header, comment lines, then ``body``.

    ``comments`` maps dotted keys (``options.replication_factor``) to a comment written at the end of that key's
    line (where the value came from)."""
    from omegaconf import OmegaConf

    lines = ["# @package _global_"] + [f"# {h}" if h else "#" for h in header]
    if not comments:
        return "\n".join(lines) + "\n" + OmegaConf.to_yaml(OmegaConf.create(dict(body)))
    return "\n".join(lines + _commented(dict(body), comments, "")) + "\n"


_COMMENT_COLUMN = 40


def _scalar(value: Any) -> str:
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text[:-3].strip() if text.endswith("...") else text


def _commented(node: Mapping[str, Any], comments: Mapping[str, str], prefix: str, indent: int = 0) -> List[str]:
    lines = []
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        pad = " " * indent
        if isinstance(value, Mapping) and value:
            lines.append(f"{pad}{key}:")
            lines += _commented(value, comments, f"{dotted}.", indent + 2)
        elif key == "defaults" and not prefix and isinstance(value, list):
            lines.append("defaults:")
            lines += [f"  - {_scalar(v) if not isinstance(v, Mapping) else ', '.join(f'{a}: {b}' for a, b in v.items())}"
                      for v in value]
        else:
            line = f"{pad}{key}: {_scalar(value)}"
            note = comments.get(dotted)
            lines.append(f"{line.ljust(_COMMENT_COLUMN)} # {note}" if note else line)
    return lines


def write_recipe(name: str, body: Mapping[str, Any], header: Sequence[str] = (), overwrite: bool = False,
                 comments: Optional[Mapping[str, str]] = None) -> Path:
    """Write ``body`` (a mapping of config keys, ``defaults`` included) as ``<user_recipe_dir>/NAME.yaml``.

    ``header`` lines become comments under the package header (where the recipe came from), ``comments`` end the
    lines of the dotted keys they name. An existing file is kept unless ``overwrite``; the path written is returned.
    """
    from ipuexp.config.store import recipe_names

    path = recipe_path(name, recipe_names())
    if path.exists() and not overwrite:
        raise ConfigError("recipe name", name, f"{path} exists; allowed: another name, or --force to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    # Whole or not at all: a temporary file of this process's own, renamed into place (a full disk leaves nothing).
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(render_recipe(body, header, comments), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path



def compose_draft(name: str, body: Mapping[str, Any], header: Sequence[str] = (),
                  comments: Optional[Mapping[str, str]] = None) -> Any:
    """The validated ExperimentConfig that recipe ``name`` would compose to, from a scratch folder standing in for
    the user's: a recipe is checked before it is written where the user will find it."""
    import shutil
    import tempfile

    from ipuexp.config.compose import load_experiment

    scratch = Path(tempfile.mkdtemp(prefix="ipuexp-recipe-"))
    old = os.environ.get(ENV_VAR)
    try:
        (scratch / f"{name}.yaml").write_text(render_recipe(body, header, comments), encoding="utf-8")
        os.environ[ENV_VAR] = str(scratch)
        return load_experiment(f"+recipe={name}")
    finally:
        if old is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = old
        shutil.rmtree(scratch, ignore_errors=True)
