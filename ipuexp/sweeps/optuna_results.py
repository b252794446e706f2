"""What an Optuna study leaves: ``optimization_results.yaml`` in the sweep folder (hydra-optuna-sweeper's file: the
best trial's parameters and value, or a multi-objective study's Pareto front) and the lines that end the sweep's
summary."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hydra.errors import CompactHydraException

from ipuexp.runner import summary

RESULTS = "optimization_results.yaml"
"""The study's results file, in the sweep folder."""


PARETO_SHOWN = 8
"""Trials of a Pareto front the summary names with their values (the results file has all)."""


class NoTrialCompleted(CompactHydraException):
    """A study none of whose trials completed: there is no best value. ``str()`` is the one line shown."""


def write(study: Any, objectives: Sequence[str], path: Path,
          outcomes: Sequence[summary.Outcome]) -> Tuple[Optional[summary.Outcome], str, List[str]]:
    """Write the study's results to ``path`` (nothing when no trial completed) and return the summary's best point
    (the study's best trial when this sweep ran it, else None: the table's fastest), what that point is, and the
    lines that follow it."""
    from omegaconf import OmegaConf

    completed = _completed(study)
    if not completed:
        return None, "", []
    by_job = {o.idx: o for o in outcomes}
    head = {"name": "optuna", "study_name": study.study_name, "objectives": list(objectives),
            "directions": [d.name.lower() for d in study.directions], "n_trials": len(study.trials)}
    if not objectives:  # another Hydra app: its returned values, named for the summary only
        del head["objectives"]
        objectives = ["value"] if len(study.directions) == 1 else [f"value {i}" for i in range(len(study.directions))]
    if len(objectives) == 1:
        best = study.best_trial
        data: Dict[str, Any] = {**head, "best_trial": best.number, "best_params": best.params,
                                "best_value": best.value}
        notes = []
        top = by_job.get(best.number)
        source = f"the study's best, as in {path}"
        if top is None or not _same(top, best.params):
            top, source = None, "the fastest of this run"
            shown = summary.shown_overrides(f"{k}={v}" for k, v in best.params.items())
            notes.append(f"Best of the whole study: trial #{best.number}, from an earlier run: {shown} "
                         f"({_figure(objectives[0], best.value)}; as in {path})")
    else:
        front = sorted(study.best_trials, key=lambda t: t.number)
        data = {**head, "solutions": [{"trial": t.number, "params": t.params, "values": t.values} for t in front]}
        top, source = None, "the fastest; the study's Pareto front below"
        arrows = ", ".join(f"{o} {'up' if d == 'maximize' else 'down'}" for o, d in zip(objectives, head["directions"]))
        # Trials with the same values are one point of the front (a sampler may propose a point again).
        points: Dict[Tuple[float, ...], List[int]] = {}
        for t in front:
            points.setdefault(tuple(t.values), []).append(t.number)
        shown = [f"{', '.join(f'#{n}' for n in numbers)} ({', '.join(_figure(o, v) for o, v in zip(objectives, values))})"
                 for values, numbers in list(points.items())[:PARETO_SHOWN]]
        more = f" and {len(points) - PARETO_SHOWN} more" if len(points) > PARETO_SHOWN else ""
        count = f"{len(front)} trials" + (f" at {len(points)} points" if len(points) < len(front) else "")
        notes = [f"Pareto front of the study ({arrows}): {count}, {'; '.join(shown)}{more} (all in {path})"]
    path.parent.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create(data), path)
    return top, source, notes


def log_best(study: Any) -> None:
    """The study's best trial (or Pareto front), logged as hydra-optuna-sweeper logs it."""
    import logging

    log = logging.getLogger("ipuexp.sweeps.optuna_study")
    if len(study.directions) == 1:
        log.info(f"Best parameters: {study.best_trial.params}")
        log.info(f"Best value: {study.best_trial.value}")
        return
    log.info(f"Number of Pareto solutions: {len(study.best_trials)}")
    for t in study.best_trials:
        log.info(f"    Values: {t.values}, Params: {t.params}")


def check_completed(study: Any) -> None:
    """Raise :class:`NoTrialCompleted` when no trial of the study completed."""
    if not _completed(study):
        raise NoTrialCompleted("every trial of the study failed (out of memory, or a rule one combination breaks: "
                               "see the sweep table above), so there is no best value; allowed: a search space with "
                               "a configuration that fits")


def _completed(study: Any) -> List[Any]:
    from optuna.trial import TrialState

    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))


def _figure(objective: str, value: float) -> str:
    """An objective's value as the summary shows it."""
    from ipuexp.units import human_bytes

    if objective == "throughput_samples_per_s":
        return f"{value:,.1f} samples/s"
    if objective.endswith("_bytes"):
        return f"{objective[:-len('_bytes')].replace('_', ' ')} {human_bytes(value)}"
    if objective == "mfu":
        return f"MFU {value:.1%}"
    return f"{objective} {value:.{summary.SIGNIFICANT}g}"


def _same(outcome: summary.Outcome, params: Dict[str, Any]) -> bool:
    """The job ran with the trial's parameters (a job number names a trial only within one study)."""
    values = dict(ov.partition("=")[::2] for ov in outcome.overrides)
    return all(values.get(k) == str(v) for k, v in params.items())
