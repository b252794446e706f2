"""Options set from outside the script: a file of setter calls (``Options.loadFromFile``) and the JSON object of
the ``POPTORCH_DEFAULT_OPTIONS`` environment variable, read by every new ``Options``
(``{"deviceIterations": 2, "Precision.enableFloatingPointExceptions": true, "_Popart.set": ["key", 1],
"connectionType": "ConnectionType.OnDemand"}``: a list is the setter's arguments, ``Enum.Member`` an enum value)."""
from __future__ import annotations

import importlib
import json
import os
from typing import Any

from ipuexp.poptorch.errors import Error


class ConfigFileError(Error):
    """An options file that does not parse (PopTorch's ``poptorch.options.ConfigFileError``)."""


def load_file(options: Any, filepath: str) -> None:
    """Run each line of ``filepath`` as a call on ``options`` (``deviceIterations(4)``), with ``poptorch`` in
    scope; blank lines and ``#`` comments are skipped. A syntax error names its line."""
    # The package the script imported, looked up at call time: this module sits below it.
    poptorch = importlib.import_module("ipuexp.poptorch")

    with open(filepath) as f:
        lines = [line.strip() for line in f]
    code = "\n".join("options." + line for line in lines if line and not line.startswith("#"))
    try:
        compiled = compile(code, "<options>", "exec")
    except SyntaxError as err:
        raise ConfigFileError(f"{type(err).__name__} at line {err.lineno} of {os.path.basename(filepath)}: "
                              f"{err.msg}\n> {(err.text or '').strip()}") from None
    exec(compiled, {"poptorch": poptorch, "options": options})  # noqa: S102 - the user's own file of setter calls


def _enum(value: Any) -> Any:
    from ipuexp.poptorch import enums  # noqa: I001 (a module of the package, not the package)

    if isinstance(value, str) and value.count(".") == 1:
        kind, member = value.split(".")
        return getattr(getattr(enums, kind, None), member, value)
    return value


def apply_defaults(options: Any, text: str) -> None:
    """Call the setters the JSON object ``text`` names on ``options``."""
    try:
        values = json.loads(text)
    except json.JSONDecodeError as err:
        raise Error(f"POPTORCH_DEFAULT_OPTIONS is not a JSON object: {err}") from None
    for name, value in values.items():
        target = options
        *path, setter = name.split(".")
        for part in path:
            target = getattr(target, part)
        args = value if isinstance(value, list) else [value]
        getattr(target, setter)(*[_enum(a) for a in args])
