"""The end-of-sweep table: one line per point, best throughput first."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

DONE, FAILED, OOM, SKIPPED = "done", "failed", "out of memory", "skipped"


@dataclass
class Outcome:
    """How one sweep point ended."""

    idx: int
    """Hydra job number."""
    overrides: List[str]
    """The job's overrides."""
    status: str
    """done, failed, out of memory (the Result says the model does not fit: ``fits == False``, or, under an
    optimisation sweeper, the job failed with ``DoesNotFit``) or skipped (the job returned ``ipuexp.result.Skipped``:
    its configuration had run before)."""
    result: Any = None
    """The task function's return value (an ipuexp Result for ipuexp jobs)."""
    error: str = ""
    """One-line error of a failed job, or why a skipped one did not run."""
    log_file: Optional[str] = None
    """The failed job's log file (it holds the traceback)."""

    @property
    def samples_per_s(self) -> Optional[float]:
        value = _get(self.result, "throughput", "samples_per_s")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _get(obj: Any, *path: str) -> Any:
    for name in path:
        if obj is None:
            return None
        obj = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
    return obj


def classify(idx: int, job_return: Any) -> Outcome:
    """An Outcome from a Hydra JobReturn."""
    from hydra.core.utils import JobStatus

    from ipuexp.result import Objective, Skipped
    from ipuexp.runner.errors import DoesNotFit

    overrides = list(job_return.overrides or [])
    if job_return.status != JobStatus.COMPLETED:
        exc = job_return._return_value
        error = " ".join(str(exc).split()) if exc is not None else "failed"
        status = OOM if getattr(exc, "error_type", None) == DoesNotFit.error_type else FAILED
        return Outcome(idx, overrides, status, error=error, log_file=getattr(exc, "log_file", None))
    result = job_return._return_value
    if isinstance(result, Objective):  # what an optimisation sweeper reads; the table shows the job's outcome
        result = result.outcome

    if isinstance(result, Skipped):
        return Outcome(idx, overrides, SKIPPED, error=result.reason)
    status = OOM if _get(result, "fits") is False else DONE
    return Outcome(idx, overrides, status, result=result)


def counts(outcomes: Sequence[Outcome]) -> Dict[str, int]:
    return {s: sum(1 for o in outcomes if o.status == s) for s in (DONE, FAILED, OOM, SKIPPED)}


def line(o: Outcome) -> str:
    """A one-line report of a finished job for the progress log."""
    if o.status in (FAILED, SKIPPED):
        return f"{o.status}: {o.error}"
    tput = o.samples_per_s
    return o.status + (f", {tput:,.1f} samples/s" if tput is not None else "")


def varying(outcomes: Sequence[Outcome]) -> List[str]:
    """Override keys whose value differs between points (the others are the same for every point)."""
    values: Dict[str, set] = {}
    for o in outcomes:
        for ov in o.overrides:
            key, _, value = ov.partition("=")
            values.setdefault(key, set()).add(value)
    return [k for k, v in values.items() if len(v) > 1 or any(k not in _keys(o) for o in outcomes)]


def _keys(o: Outcome) -> set:
    return {ov.partition("=")[0] for ov in o.overrides}


def ordered(outcomes: Sequence[Outcome]) -> List[Outcome]:
    """Highest throughput first; points without one keep their job order, failures last."""
    rank = {DONE: 0, OOM: 1, SKIPPED: 2, FAILED: 3}
    return sorted(outcomes, key=lambda o: (o.samples_per_s is None, -(o.samples_per_s or 0.0), rank[o.status],
                                            o.idx))


def best(outcomes: Sequence[Outcome]) -> Optional[Outcome]:
    """The fitting point with the highest throughput."""
    fitting = [o for o in outcomes if o.status == DONE and o.samples_per_s is not None]
    return max(fitting, key=lambda o: o.samples_per_s) if fitting else None


def _memory(result: Any) -> Optional[str]:
    ipus = _get(result, "memory", "ipus")
    if not ipus:
        return None
    share = max(_get(i, "total_bytes") / _get(i, "capacity_bytes") for i in ipus)
    return f"{100 * share:.0f}%"


def _value(result: Any) -> str:
    """A plain return value as text (a task function that is not ipuexp's); objects are left out."""
    if result is None:
        return ""
    if isinstance(result, (str, int, float, bool, dict, list, tuple)):
        text = repr(result) if not isinstance(result, str) else result
        return text if len(text) <= 40 else text[:39] + "…"
    return ""


def headline(outcomes: Sequence[Outcome]) -> str:
    c = counts(outcomes)
    skipped = f", {c[SKIPPED]} skipped" if c[SKIPPED] else ""
    return f"{c[DONE]} done, {c[FAILED]} failed, {c[OOM]} out of memory{skipped}"


def render(outcomes: Sequence[Outcome]) -> Any:
    """A rich Table of the sweep, one row per point."""
    from rich.table import Table

    keys = varying(outcomes)
    show_tput = any(o.samples_per_s is not None for o in outcomes)
    show_mem = any(_memory(o.result) for o in outcomes)
    show_step = any(_get(o.result, "throughput", "step_time_s") is not None for o in outcomes)
    show_value = not show_tput and any(_value(o.result) for o in outcomes)
    top = best(outcomes)
    table = Table()
    table.add_column("#", justify="right")
    for k in keys:
        table.add_column(k.split(".")[-1] if _unique_tail(keys, k) else k, justify="right")
    table.add_column("status", no_wrap=True)
    if show_tput:
        table.add_column("samples/s", justify="right")
    if show_step:
        table.add_column("step s", justify="right")
    if show_mem:
        table.add_column("max IPU memory", justify="right")
    if show_value:
        table.add_column("result")
    for o in ordered(outcomes):
        values = dict(ov.partition("=")[::2] for ov in o.overrides)
        row = [str(o.idx)] + [values.get(k, "") for k in keys] + [o.status]
        if show_tput:
            row.append(f"{o.samples_per_s:,.1f}" if o.samples_per_s is not None else "")
        if show_step:
            step = _get(o.result, "throughput", "step_time_s")
            row.append(f"{step:.4g}" if step is not None else "")
        if show_mem:
            row.append(_memory(o.result) or "")
        if show_value:
            row.append(_value(o.result))
        style = "bold green" if o is top else {FAILED: "red", OOM: "yellow", SKIPPED: "dim"}.get(o.status)
        table.add_row(*row, style=style)
    return table


def _unique_tail(keys: Sequence[str], key: str) -> bool:
    tail = key.split(".")[-1]
    return sum(1 for k in keys if k.split(".")[-1] == tail) == 1


def timing_line(wall_s: float, slots: int, compose_s: Sequence[float], timings: Sequence[Any]) -> str:
    """Where a sweep's time went, per job: the task itself, Hydra's run_job around it, composing its config."""
    import statistics

    known = [t for t in timings if t is not None]
    if not known:
        return ""
    task = statistics.mean(t.task_s for t in known)
    around = statistics.mean(t.worker_s - t.task_s for t in known)
    compose = statistics.mean(compose_s) if compose_s else 0.0
    return (f"{len(timings)} jobs in {wall_s:.1f} s, {slots} at a time; per job {1000 * task:.0f} ms in the task, "
            f"{1000 * around:.0f} ms in Hydra's run_job around it, {1000 * compose:.0f} ms composing its configuration")


def print_summary(outcomes: Sequence[Outcome], title: str = "Sweep", timing: str = "") -> None:
    """Headline, table, best fitting point, where the failed jobs' tracebacks are, and where the time went."""
    from rich.console import Console

    console = Console()
    console.print(f"{title}: {headline(outcomes)}", highlight=False, soft_wrap=True, markup=False)
    if outcomes:
        console.print(render(outcomes))
    top = best(outcomes)
    if top is not None:
        console.print(f"Best fitting point: #{top.idx} {' '.join(top.overrides)} ({top.samples_per_s:,.1f} samples/s)",
                      highlight=False, soft_wrap=True)
    for o in outcomes:  # one unwrapped line each, so an error message can be read and searched whole
        if o.status == FAILED:
            where = f" (traceback in {o.log_file})" if o.log_file else ""
            console.print(f"#{o.idx} failed: {o.error}{where}", highlight=False, soft_wrap=True, markup=False)
    if timing:
        console.print(timing, highlight=False, soft_wrap=True, markup=False)
