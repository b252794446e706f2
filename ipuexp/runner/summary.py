"""The end-of-sweep table: one line per point, best throughput first."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence

DONE, FAILED, OOM, SKIPPED = "done", "failed", "out of memory", "skipped"

SIGNIFICANT = 4
"""Significant digits of a long decimal value on the console (an optimisation sweeper's float samples); the exact
values are in each job's ``.hydra/overrides.yaml`` (and Optuna's ``optimization_results.yaml``)."""


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

    @property
    def sequences_per_s(self) -> Optional[float]:
        """Packed sequences: sequences per second (its samples are packs); None otherwise."""
        value = _get(self.result, "throughput", "sequences_per_s")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    @property
    def rate(self) -> Optional[float]:
        """What points are ranked by: sequences per second for a packed point, else samples per second (an unpacked
        sample is one sequence)."""
        return self.sequences_per_s if self.sequences_per_s is not None else self.samples_per_s


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
    from ipuexp.runner.errors import DoesNotFit, JobFailedError, describe

    overrides = list(job_return.overrides or [])
    if job_return.status != JobStatus.COMPLETED:
        exc = job_return._return_value
        # ipuexp's launchers send a job's error as one line already; another launcher's is the exception itself
        text = str(exc) if isinstance(exc, JobFailedError) else describe(exc) if exc is not None else "failed"
        error = " ".join(text.split())
        oom = isinstance(exc, DoesNotFit) or getattr(exc, "error_type", None) == DoesNotFit.error_type
        return Outcome(idx, overrides, OOM if oom else FAILED, error=error, log_file=getattr(exc, "log_file", None))
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


def progress(done: int, total: int, o: Outcome, keys: Sequence[str]) -> str:
    """The one line a sweep prints as a point ends: ``[3/9] #2 done, 3,439.2 samples/s (a=1 b=x)``, with the
    values of ``keys`` (what varies between the points) naming the point."""
    values = dict(ov.partition("=")[::2] for ov in o.overrides)
    named = " ".join(f"{k}={shown(values[k])}" for k in keys if k in values)
    return log_lines(f"[{done}/{total}] #{o.idx} {line(o)}" + (f" ({named})" if named else ""))


LOG_PREFIX = len("[HYDRA] ")
"""What Hydra's console log puts before a message (``conf/config.yaml``: ``hydra.hydra_logging``)."""


def log_lines(text: str) -> str:
    """``text`` broken between words to fit the terminal after Hydra's log prefix (continuations indented)."""
    import shutil

    from ipuexp.terminal_table import wrap

    width = max(40, shutil.get_terminal_size((120, 24)).columns - LOG_PREFIX)
    return wrap(text, width) or text  # a figure keeps its unit on its line


def shown(value: str) -> str:
    """An override's value as the console shows it: a long decimal (``0.3497859536643815``) to ``SIGNIFICANT``
    digits, anything else as it is."""
    if len(value) <= SIGNIFICANT + 3 or not any(c in value for c in ".eE"):
        return value
    try:
        number = float(value)
    except ValueError:
        return value
    return f"{number:.{SIGNIFICANT}g}"


def shown_overrides(overrides: Iterable[str]) -> str:
    return " ".join(f"{k}={shown(v)}" if sep else k for k, sep, v in (ov.partition("=") for ov in overrides))


def varying_keys(points: Sequence[Sequence[str]]) -> List[str]:
    """Override keys whose value differs between points (the others are the same for every point)."""
    values: Dict[str, set] = {}
    for overrides in points:
        for ov in overrides:
            key, _, value = ov.partition("=")
            values.setdefault(key, set()).add(value)
    keys = [{ov.partition("=")[0] for ov in overrides} for overrides in points]
    return [k for k, v in values.items() if len(v) > 1 or any(k not in ks for ks in keys)]


def varying(outcomes: Sequence[Outcome]) -> List[str]:
    return varying_keys([o.overrides for o in outcomes])


def ordered(outcomes: Sequence[Outcome]) -> List[Outcome]:
    """Highest throughput first; points without one keep their job order, failures last."""
    rank = {DONE: 0, OOM: 1, SKIPPED: 2, FAILED: 3}
    return sorted(outcomes, key=lambda o: (o.rate is None, -(o.rate or 0.0), rank[o.status], o.idx))


def best(outcomes: Sequence[Outcome]) -> Optional[Outcome]:
    """The fitting point with the highest throughput (sequences per second where packs are compared)."""
    fitting = [o for o in outcomes if o.status == DONE and o.rate is not None]
    return max(fitting, key=lambda o: o.rate) if fitting else None


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


def render(outcomes: Sequence[Outcome], top: Optional[Outcome] = None) -> Any:
    """A table of the sweep (:mod:`ipuexp.terminal_table`: it fits the console it is printed on), one row per
    point, ``top`` (default: :func:`best`) highlighted on a terminal."""
    from ipuexp.terminal_table import Column, Table

    keys = varying(outcomes)
    show_tput = any(o.samples_per_s is not None for o in outcomes)
    show_mem = any(_memory(o.result) for o in outcomes)
    show_step = any(_get(o.result, "throughput", "step_time_s") is not None for o in outcomes)
    show_value = not show_tput and any(_value(o.result) for o in outcomes)
    # Packed points are ranked by sequences per second: the column shows what the rows are ordered by.
    packed = any(o.sequences_per_s is not None for o in outcomes)
    steps = [_get(o.result, "throughput", "step_time_s") for o in outcomes]
    step_decimals = _step_decimals([s for s in steps if s is not None])
    top = top if top is not None else best(outcomes)
    rows, styles = [], []
    for o in ordered(outcomes):
        values = dict(ov.partition("=")[::2] for ov in o.overrides)
        row = [str(o.idx)] + [shown(values.get(k, "")) for k in keys] + [o.status]
        if show_tput:
            rate = o.rate if packed else o.samples_per_s
            row.append(f"{rate:,.1f}" if rate is not None else "")
        if show_step:
            step = _get(o.result, "throughput", "step_time_s")
            row.append(f"{step:.{step_decimals}f}" if step is not None else "")
        if show_mem:
            row.append(_memory(o.result) or "")
        if show_value:
            row.append(_value(o.result))
        rows.append(row)
        styles.append("bold green" if o is top else {FAILED: "red", OOM: "yellow", SKIPPED: "dim"}.get(o.status))
    # A key's words (underscores as spaces) fold in a narrow column rather than break mid-word; swept values are
    # right-aligned, and fold only when they are text.
    keyed = [Column((k.split(".")[-1] if _unique_tail(keys, k) else k).replace("_", " "), align="right",
                    figure=None if all(len(r[n + 1].split()) <= 1 for r in rows) else False)
             for n, k in enumerate(keys)]
    columns = ([Column("#", figure=True)] + keyed + [Column("status", figure=False)]
               + [Column("sequences/s" if packed else "samples/s", figure=True)] * show_tput
               + [Column("step s", figure=True)] * show_step
               + [Column("max IPU memory", figure=True)] * show_mem + [Column("result", figure=False)] * show_value)
    return Table(columns, rows, styles=styles)


def _step_decimals(steps: Sequence[float]) -> int:
    """One number of decimals for a column of step times: 4 significant digits of the longest (66.14, 20.00, 9.48;
    0.008769, 0.004749)."""
    import math

    longest = max((s for s in steps if s > 0), default=0.0)
    return 0 if longest <= 0 else max(0, 3 - math.floor(math.log10(longest)))


def _unique_tail(keys: Sequence[str], key: str) -> bool:
    tail = key.split(".")[-1]
    return sum(1 for k in keys if k.split(".")[-1] == tail) == 1


def timing_line(wall_s: float, slots: Optional[int], compose_s: Sequence[float], timings: Sequence[Any]) -> str:
    """Where a sweep's time went, per job: the task itself, Hydra's run_job around it, composing its config. Only
    the wall time for a launcher that does not say (``slots`` None, or no job timings)."""
    import statistics

    known = [t for t in timings if t is not None]
    if not known or slots is None:
        return f"{len(timings)} jobs in {wall_s:.1f} s" if timings else ""
    task = statistics.mean(t.task_s for t in known)
    around = statistics.mean(t.worker_s - t.task_s for t in known)
    compose = statistics.mean(compose_s) if compose_s else 0.0
    return (f"{len(timings)} jobs in {wall_s:.1f} s, {slots} at a time; per job {1000 * task:.0f} ms in the task, "
            f"{1000 * around:.0f} ms in Hydra's run_job around it, {1000 * compose:.0f} ms composing its configuration")


def best_line(top: Outcome, source: str = "") -> str:
    tput = f"{top.samples_per_s:,.1f} samples/s" if top.samples_per_s is not None else top.status
    if top.sequences_per_s is not None:
        tput = f"{top.sequences_per_s:,.1f} sequences/s, {top.samples_per_s:,.1f} packs/s"
    return f"Best fitting point: #{top.idx} {shown_overrides(top.overrides)} ({tput}{'; ' + source if source else ''})"


def print_summary(outcomes: Sequence[Outcome], title: str = "Sweep", timing: str = "",
                  top: Optional[Outcome] = None, source: str = "", notes: Sequence[str] = ()) -> None:
    """Headline, table, best fitting point (``top``, default :func:`best`; ``source`` says where it is recorded),
    the sweeper's ``notes``, where the failed jobs' tracebacks are, and where the time went, all within the
    console's width (:mod:`ipuexp.terminal_table`): the table folds long keys, or becomes a record per point;
    the lines break between words (a long path or value stays whole on a line of its own)."""
    from ipuexp.terminal_table import terminal_console, wrap

    console = terminal_console()
    width = console.width

    def say(text: str) -> None:  # a figure keeps its unit on its line (553.8 KiB)
        console.print(wrap(text, width), highlight=False, soft_wrap=True, markup=False)

    say(f"{title}: {headline(outcomes)}")
    if outcomes:
        console.print(render(outcomes, top))
    top = top if top is not None else best(outcomes)
    if top is not None:
        say(best_line(top, source))
    for note in notes:
        say(note)
    for o in outcomes:
        if o.status == FAILED:
            where = f" (traceback in {o.log_file})" if o.log_file else ""
            say(f"#{o.idx} failed: {o.error}{where}")
    if timing:
        say(timing)
