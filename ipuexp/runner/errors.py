"""How a failed sweep job reaches the driver: one line, whatever the worker raised."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import CompactHydraException


class JobFailedError(CompactHydraException):
    """A sweep job that raised (or whose worker died). ``str()`` is the one line shown to the user.

    Exceptions do not keep their traceback across processes and some cannot be unpickled at all, so the type name,
    message and remote traceback travel as plain text. :func:`job_error` makes one that is also an instance of the
    job's own exception type, so ``except ZeroDivisionError`` around ``JobReturn.return_value`` works as under
    Hydra's basic launcher, while Hydra still prints it as one line.
    """

    def __init__(self, message: str, error_type: str = "", remote_traceback: str = "",
                 log_file: Optional[str] = None, config_error: bool = False):
        self._fill(message, error_type, remote_traceback, log_file, config_error)
        super().__init__(message)

    def _fill(self, message: str, error_type: str, remote_traceback: str, log_file: Optional[str],
              config_error: bool) -> None:
        self.message = message
        """The job's error message (a ConfigError's one line as it is)."""
        self.error_type = error_type
        """Class name of the exception the job raised (empty for a dead worker)."""
        self.remote_traceback = remote_traceback
        """The traceback as formatted in the worker."""
        self.log_file = log_file
        """The job's Hydra log file, which holds the traceback too."""
        self.config_error = config_error
        """True when the job rejected its configuration (ipuexp ConfigError)."""

    def __str__(self) -> str:  # the one line, whatever the job's own type prints (KeyError quotes its argument)
        return self.message

    def __reduce__(self) -> Tuple[Any, ...]:
        kind = getattr(type(self), "_job_type", None)
        return (_rebuild, (kind, self.message, self.error_type, self.remote_traceback, self.log_file,
                           self.config_error))


_LIKE: Dict[type, type] = {}
"""The JobFailedError subclass made for each exception type a job raised."""


def job_error(exc: BaseException, message: str, remote_traceback: str = "", log_file: Optional[str] = None,
              config_error: bool = False) -> JobFailedError:
    """A JobFailedError that is also an instance of ``exc``'s type when that type allows it (a type whose
    constructor or layout does not, or a BaseException outside Exception, gives a plain JobFailedError)."""
    return _rebuild(type(exc), message, type(exc).__name__, remote_traceback, log_file, config_error)


def _rebuild(kind: Optional[type], message: str, error_type: str, remote_traceback: str, log_file: Optional[str],
             config_error: bool) -> JobFailedError:
    if kind is not None and issubclass(kind, Exception) and not issubclass(kind, JobFailedError):
        try:
            cls = _LIKE.get(kind) or _LIKE.setdefault(kind, type(kind.__name__, (JobFailedError, kind), {
                "__module__": kind.__module__, "__qualname__": kind.__qualname__, "_job_type": kind}))
            err = cls.__new__(cls, message)
            err._fill(message, error_type, remote_traceback, log_file, config_error)
            err.args = (message,)
            return err
        except Exception:  # e.g. two exception types whose C layouts differ
            pass
    return JobFailedError(message, error_type, remote_traceback, log_file, config_error)


class DoesNotFit(CompactHydraException):
    """A configuration that does not fit in IPU memory, reported to a Hydra optimisation sweeper as a failed job
    (its trial FAILED) after its run and ``result.json`` were recorded as for any out-of-memory point. ``str()`` is
    the one line shown to the user."""

    error_type = "DoesNotFit"
    """What the sweep's table reads from a JobFailedError to list the point as out of memory."""


class SweepReturn(JobReturn):
    """A JobReturn whose ``return_value`` raises a failed job's error without Hydra's "Error executing job with
    overrides" line on stderr: the sweep's summary lists every failure, and a trial that does not fit in memory is
    an expected outcome of an optimisation sweeper, not an error."""

    @property  # type: ignore[override]
    def return_value(self) -> Any:
        assert self.status != JobStatus.UNKNOWN, "return_value not yet available"
        if self.status == JobStatus.COMPLETED:
            return self._return_value
        raise self._return_value

    @return_value.setter
    def return_value(self, value: Any) -> None:
        self._return_value = value

    @classmethod
    def of(cls, ret: JobReturn) -> JobReturn:
        """``ret`` as a SweepReturn (itself when it is one already)."""
        if isinstance(ret, SweepReturn):
            return ret
        quiet = cls.__new__(cls)
        quiet.__dict__.update(ret.__dict__)
        return quiet


def failed_return(overrides: List[str], error: JobFailedError) -> Any:
    """A FAILED JobReturn for a job that never produced one (bad override, dead worker)."""
    ret = SweepReturn(overrides=list(overrides), status=JobStatus.FAILED)
    ret.return_value = error
    return ret


def describe(exc: BaseException) -> str:
    """One line for an exception: a ConfigError's or DoesNotFit's own text, otherwise ``Type: message``."""
    if is_config_error(exc) or isinstance(exc, DoesNotFit):
        return str(exc)
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def is_config_error(exc: BaseException) -> bool:
    from ipuexp.config.errors import ConfigError

    return isinstance(exc, ConfigError)
