"""What ipuexp.poptorch raises: an API or option it cannot honour, and the end of a prediction-only run."""
from __future__ import annotations


class Error(RuntimeError):
    """PopTorch's ``poptorch.Error``, for scripts that catch it."""


class UnsupportedError(Exception):
    """A PopTorch API or option whose semantics ipuexp cannot honour; the command prints it on one line. Not a
    ``poptorch.Error`` nor a RuntimeError, so that a script catching those does not hide it."""

    def __init__(self, what: str, supported: str) -> None:
        super().__init__(f"{what} is not supported; supported: {supported}")
        self.what = what
        self.supported = supported


class PredictionDone(BaseException):
    """Stops a script after its prediction (``--predict-only``); a BaseException, so that a script's own
    ``except Exception`` does not catch it."""


class DoesNotFit(BaseException):
    """Stops a script whose model does not fit in IPU memory under ``report.fail_on_oom=true``, as PopTorch's
    compile would fail; a BaseException for the same reason as PredictionDone."""
