"""Run a script with ``import poptorch`` bound to ``ipuexp.poptorch``: its job's session around it, its own
arguments, its folder first on ``sys.path``; its errors reported as its own traceback, an unsupported API on one
line."""
from __future__ import annotations

import os
import runpy
import sys
import traceback
from pathlib import Path
from typing import Any, List

from ipuexp.poptorch.errors import DoesNotFit, PredictionDone, UnsupportedError
from ipuexp.poptorch.session import Session, session

EXIT_UNSUPPORTED = 2
_PACKAGE = str(Path(__file__).resolve().parent.parent)


class ScriptFailed(RuntimeError):
    """A script ended with an error (already reported); ``code`` is the exit status."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def bind_poptorch() -> None:
    """``import poptorch`` (and ``poptorch.optim``, ``poptorch.enums``) gives ipuexp's modules."""
    import ipuexp.poptorch as module
    from ipuexp.poptorch import enums, optim

    sys.modules["poptorch"] = module
    sys.modules["poptorch.optim"] = optim
    sys.modules["poptorch.enums"] = enums


def run(script: str, args: List[str], job: Session) -> Any:
    """Run ``script`` with ``args`` as the session ``job``; returns the job's result (None if nothing was compiled).
    Raises ScriptFailed after reporting a script's error or an unsupported API."""
    bind_poptorch()
    path = str(Path(script).resolve())
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(path))
    try:
        with session(job):
            try:
                runpy.run_path(path, run_name="__main__")
            except PredictionDone:
                pass
            except DoesNotFit:
                from ipuexp.exit_status import EXIT_DOES_NOT_FIT

                print(f"ipuexp.poptorch: {Path(script).name} stopped at its prediction: the model does not fit in "
                      "IPU memory (report.fail_on_oom=true)", file=sys.stderr)
                raise ScriptFailed("does not fit", EXIT_DOES_NOT_FIT) from None
            except SystemExit as exc:
                if exc.code not in (0, None):
                    job.close(exc)
                    raise ScriptFailed(f"{script} exited with status {exc.code}", int(exc.code)
                                       if isinstance(exc.code, int) else 1) from None
            except UnsupportedError as exc:
                job.close(exc)
                print(f"ipuexp.poptorch: {exc}", file=sys.stderr)
                raise ScriptFailed(str(exc), EXIT_UNSUPPORTED) from None
            except Exception as exc:
                from ipuexp.config.errors import ConfigError

                job.close(exc)
                if isinstance(exc, ConfigError):
                    print(f"ipuexp: config error: {exc}", file=sys.stderr)
                    raise ScriptFailed(str(exc), EXIT_UNSUPPORTED) from None
                print_script_error(exc)
                raise ScriptFailed(f"{script}: {type(exc).__name__}: {exc}", 1) from None
            job.close()
            if not job.predicted:
                print(f"ipuexp.poptorch: {script} called no poptorch.trainingModel or inferenceModel: nothing to "
                      "predict", file=sys.stderr)
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
    return job.result


def print_script_error(exc: BaseException) -> None:
    """The script's traceback, without ipuexp's frames (the script's code and the libraries it calls stay)."""
    te = traceback.TracebackException.from_exception(exc)
    for item in _chain(te):
        kept = [f for f in item.stack if not f.filename.startswith(_PACKAGE) and "runpy" not in f.filename]
        item.stack = traceback.StackSummary.from_list(kept)
    print("".join(te.format()), end="", file=sys.stderr)


def _chain(te: traceback.TracebackException) -> List[traceback.TracebackException]:
    out, seen = [], set()
    while te is not None and id(te) not in seen:
        seen.add(id(te))
        out.append(te)
        te = te.__cause__ or te.__context__
    return out
