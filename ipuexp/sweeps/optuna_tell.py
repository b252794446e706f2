"""What the Optuna study is told of each trial's job: the values it is judged by, or that it failed.

ipuexp's own jobs (``python -m ipuexp``) return an ``ipuexp.result.Objective`` whose run metrics hold the study's
objectives. Any other Hydra app is judged as hydra-optuna-sweeper judges it: the float its task function returns,
or, in a study with one direction per value, the tuple (or list) of them; anything else fails the trial with that
plugin's message.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, List, Sequence, Tuple

if TYPE_CHECKING:
    from ipuexp.config.types import ConfigNode

log = logging.getLogger("ipuexp.sweeps.optuna_study")

OWN_CONFIGS = "ipuexp.conf"
"""The package whose configs make a Hydra app ipuexp's own (its jobs return run metrics)."""


def own_jobs(config: ConfigNode) -> bool:
    """The sweep's jobs are ipuexp's (composed from ``ipuexp.conf``), not another Hydra app's."""
    sources = config.hydra.runtime.get("config_sources") or []
    return any(str(s.get("path", "")) == OWN_CONFIGS for s in sources)


def tell(study: Any, trials: Sequence[Any], returns: Sequence[Any], objectives: Sequence[str],
         max_failure_rate: float) -> List[Tuple[int, str]]:
    """Tell the study each trial's values, or that it failed; stop the study when more than ``max_failure_rate``
    of the batch failed, raising the first failed job's own error. Returns the batch positions of jobs that
    finished but whose values the study could not take, with why (the sweep's table lists them as failed)."""
    from hydra.core.utils import JobStatus
    from optuna.trial import TrialState

    failed: List[Any] = []
    refused: List[Tuple[int, str]] = []
    for pos, (trial, ret) in enumerate(zip(trials, returns)):
        try:
            values = _values(ret.return_value, objectives, len(study.directions))
        except Exception as err:  # the job's own error (DoesNotFit for a configuration that does not fit)
            from ipuexp.runner.summary import log_lines

            told(study, trial, state=TrialState.FAIL)
            log.warning(log_lines(f"Failed experiment: {err}"))  # hydra-optuna-sweeper's words, within the terminal
            failed.append(ret)
            if ret.status == JobStatus.COMPLETED:
                refused.append((pos, " ".join(str(err).split())))
            continue
        told(study, trial, values=values)
    if failed and len(failed) / len(returns) > max_failure_rate:
        log.error(f"{len(failed)} of {len(returns)} trials failed, more than "
                  f"hydra.sweeper.max_failure_rate={max_failure_rate}")
        for ret in failed:
            ret.return_value  # raises a failed job's error; a value that was no number goes on, as in Hydra's plugin
    return refused


_STOP_OUTSIDE_OPTIMIZE = "`Study.stop` is supposed to be invoked inside an objective function or a callback."


def told(study: Any, trial: Any, **outcome: Any) -> None:
    """``study.tell``. Once its grid is used up, Optuna's grid sampler asks the study to stop, which Optuna allows
    only inside ``study.optimize`` (optuna issue 4121); the trial is recorded before that, and the sweeper asks no
    more trials than the grid has, so the request is ignored."""
    try:
        study.tell(trial, **outcome)
    except RuntimeError as err:
        if str(err) != _STOP_OUTSIDE_OPTIMIZE:
            raise


def _values(value: Any, objectives: Sequence[str], n_directions: int) -> List[float]:
    """The values of what a job returned: its run metrics named by ``objectives`` (ipuexp's own jobs; a plain
    number is the throughput), or without objectives the returned value(s), as hydra-optuna-sweeper reads them."""
    if not objectives:
        return _returned(value, n_directions)
    metrics = getattr(value, "metrics", None)
    if metrics is None:
        if list(objectives) != ["throughput_samples_per_s"]:
            raise ValueError(f"the job returned {value!r}, which holds no {', '.join(objectives)}")
        return [float(value)]
    missing = [name for name in objectives if name not in metrics]
    if missing:
        raise ValueError(f"the run has no {', '.join(missing)} to judge it by")
    return [float(metrics[name]) for name in objectives]


def _returned(value: Any, n_directions: int) -> List[float]:
    if n_directions == 1:
        try:
            return [float(value)]
        except (ValueError, TypeError):
            raise ValueError(f"Return value must be float-castable. Got '{value}'.") from None
    try:
        values = [float(v) for v in value]
    except (ValueError, TypeError):
        raise ValueError("Return value must be a list or tuple of float-castable values."
                         f" Got '{value}'.") from None
    if len(values) != n_directions:
        raise ValueError("The number of the values and the number of the objectives are"
                         f" mismatched. Expect {n_directions}, but actually {len(values)}.")
    return values
