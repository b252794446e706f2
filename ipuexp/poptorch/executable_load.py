"""``poptorch.load``: the executor an executable file was exported from (``executables`` writes and reads the file;
this module sits above the executor it builds)."""
from __future__ import annotations

from typing import Any, Callable, Optional

from ipuexp.poptorch.enums import ConnectionType
from ipuexp.poptorch.errors import Error
from ipuexp.poptorch.executables import _read
from ipuexp.poptorch.executor import PoplarExecutor


def load(filename: str, edit_opts_fn: Optional[Callable[[Any], None]] = None) -> Any:
    """The executor ``filename`` was exported from, ready to run (it compiles at its first call)."""
    data = _read(filename)
    if data["model"] is None:
        raise Error(f"{filename} was exported with export_model=False: build the model in Python and call "
                    "loadExecutable on it")
    options = data["options"]
    # compiled for an offline target, loaded to run (PopTorch's load connects it: ConnectionType.Always)
    options.calls.pop("useOfflineIpuTarget", None)
    if options.calls.get("connectionType") == ConnectionType.Never:
        options.calls["connectionType"] = ConnectionType.Always
    if edit_opts_fn is not None:
        edit_opts_fn(options)
    return PoplarExecutor(data["model"], options, data["training"], data["optimizer"])
