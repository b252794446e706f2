"""The command line of a ``benchmarks.yml`` entry (``cmd``): ``[poprun FLAGS] python SCRIPT FLAGS``, read as the
applications' argument parsers read it (``--flag-name value`` is the key ``flag_name``).
"""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Dict, List, Tuple

from ipuexp.importers.mapping import refuse


def parse_command(cmd: str) -> Tuple[str, Dict[str, Any], Dict[str, Any]]:
    """``[poprun FLAGS] python SCRIPT FLAGS`` -> (script, the script's flags, poprun's flags); values as YAML
    scalars, several values as a list, a bare flag as true."""
    import yaml

    words = shlex.split(cmd)
    script_at = next((i for i, w in enumerate(words) if w.endswith(".py")), None)
    if script_at is None:
        raise refuse("cmd", cmd.split()[0] if cmd.split() else cmd, "allowed: a command running a Python script")
    launcher = words[:script_at]
    poprun = _flags([w for w in launcher if w.startswith("--") and not w.startswith("--mpi")]) \
        if launcher and launcher[0] == "poprun" else {}
    flags = _flags(words[script_at + 1:])
    parsed = {k: [yaml.safe_load(x) for x in v] if isinstance(v, list) else (yaml.safe_load(v) if isinstance(v, str)
              else v) for k, v in flags.items()}
    parsed = {k: (v[0] if isinstance(v, list) and len(v) == 1 else v) for k, v in parsed.items()}
    pop = {k: yaml.safe_load(v) if isinstance(v, str) else v for k, v in poprun.items()}
    return Path(words[script_at]).name, parsed, pop


def _flags(words: List[str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    key = None
    for w in words:
        if w.startswith("--"):
            name, eq, value = w[2:].partition("=")
            key = name.replace("-", "_")
            out[key] = value if eq else True
            if eq:
                key = None
        elif key is not None:
            prev = out[key]
            out[key] = w if prev is True else (prev + [w] if isinstance(prev, list) else [prev, w])
    return out
