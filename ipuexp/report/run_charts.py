"""The files a run draws besides its result: the step's trace and Gantt chart, the memory and liveness charts.

They take a second or so of CPU (hundreds of thousands of events, matplotlib), more than the prediction. They are
drawn while the run goes on: in a worker that ``python -m ipuexp`` forked as it started, which has loaded matplotlib
and the engine meanwhile and makes an evaluation of its own (``charts_in_worker``); else in a process forked once the
prediction is made (``charts_aside``). The files are the same wherever they are drawn.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from ipuexp.config.schema import ExperimentConfig
from ipuexp.runner.evaluation import Evaluation, evaluate


CHART_FILES = {"trace": "trace.json.gz", "gantt": "pipeline.png", "memory_chart": "memory.png",
               "liveness_chart": "liveness.png"}
"""The files a run writes besides its result (``report.charts``), by their ``result.artifacts`` key."""


def save_step_charts(ev: Evaluation, out: Path) -> None:
    """The step's events (hundreds of thousands), its trace (in a process of its own) and its Gantt chart."""
    from ipuexp.report.gantt import draw_gantt
    from ipuexp.report.gc_freeze import collection_paused
    from ipuexp.report.trace import write_trace_aside

    title = f"{ev.result.recipe or ev.result.model.name}: one step"
    with collection_paused():  # hundreds of thousands of events, without cycles: collections would only walk them
        events = ev.step_events()
    join_trace = write_trace_aside(events, out / CHART_FILES["trace"], title=title)  # on the other core
    try:
        draw_gantt(events, out / CHART_FILES["gantt"], title=title)
    except BaseException:
        join_trace(False)
        raise
    join_trace()


def save_memory_charts(ev: Evaluation, out: Path) -> None:
    from ipuexp.report.memory_chart import save_liveness_chart, save_memory_chart

    memory = ev.result.memory
    save_memory_chart(memory, out / CHART_FILES["memory_chart"])
    worst = max(memory.ipus, key=lambda m: m.max_tile_bytes)
    save_liveness_chart(ev.liveness, out / CHART_FILES["liveness_chart"], capacity_bytes=worst.capacity_bytes,
                        title=f"Liveness, IPU {worst.ipu}")


def charts_aside(ev: Evaluation, out: Path) -> Callable[[], None]:
    """Start the step's charts (``save_step_charts``) in a forked process (``report.aside``): the events, the trace
    and the Gantt chart take a second or so of CPU, which the other core spends while this process goes on. The
    returned function draws the memory and liveness charts here, waits for the others (drawing them here if the
    child failed) and records their paths in the result."""
    import matplotlib.figure  # noqa: F401  (loaded once, before the fork, for both processes' charts)
    from matplotlib.backends import backend_agg  # noqa: F401

    from ipuexp.report.aside import start_aside

    join = start_aside(lambda: save_step_charts(ev, out))

    def done() -> None:
        from ipuexp.report.gc_freeze import collection_paused

        try:
            with collection_paused():  # no collection walking (and copying) the pages the forked process shares
                save_memory_charts(ev, out)
        except BaseException:
            join(False)
            raise
        join()
        _record_charts(ev, out)

    return done


def _record_charts(ev: Evaluation, out: Path) -> None:
    for key, name in CHART_FILES.items():
        ev.result.artifacts[key] = str((out / name).resolve())


def load_for_charts() -> None:
    """Import what ``draw_charts`` uses (``python -m ipuexp`` does it in a worker while the command is checked:
    ``runner.warm_worker``)."""
    import matplotlib.figure  # noqa: F401
    from matplotlib.backends import backend_agg  # noqa: F401

    import ipuexp.calibration.band  # noqa: F401
    import ipuexp.calibration.user  # noqa: F401
    import ipuexp.emulator.memory  # noqa: F401
    import ipuexp.emulator.model_figures  # noqa: F401
    import ipuexp.emulator.position  # noqa: F401
    import ipuexp.emulator.timing  # noqa: F401
    import ipuexp.execution.execution  # noqa: F401
    import ipuexp.graph.cache  # noqa: F401
    import ipuexp.graph.capture  # noqa: F401
    import ipuexp.report.aside  # noqa: F401
    import ipuexp.report.gantt  # noqa: F401
    import ipuexp.report.memory_chart  # noqa: F401
    import ipuexp.report.trace  # noqa: F401
    import ipuexp.runner.captures  # noqa: F401


def draw_charts(exp: ExperimentConfig, out: Path) -> Evaluation:
    """A run's charts from an evaluation of its own (the worker's task): the engine's answer is the same in every
    process. The memory charts are drawn in a forked process while the step's events are made here. Returns the
    evaluation, events and all, for the caller to free (or not: a worker ends without)."""
    from ipuexp.report.aside import start_aside
    from ipuexp.report.gc_freeze import collection_paused

    with collection_paused():  # a process that ends with its charts: nothing it makes needs collecting
        ev = evaluate(exp)
        join = start_aside(lambda: save_memory_charts(ev, out))
        save_step_charts(ev, out)
        join()
    return ev


def charts_in_worker(exp: ExperimentConfig, out: Path) -> Optional[Callable[[Evaluation], None]]:
    """``draw_charts`` handed to the worker ``python -m ipuexp`` forked as it started, if one waits (None else), once
    the graph it needs can be read rather than captured. The returned function waits for it and records the charts'
    paths, drawing them here where the worker did not."""
    from ipuexp.runner import captures, warm_worker

    if not captures.ready(exp.model, exp.data.micro_batch_size, exp.engine.cache_dir):
        return None
    join = warm_worker.submit(draw_charts, exp, out.resolve())
    if join is None:
        return None

    def done(ev: Evaluation) -> None:
        # Idle until the worker is done: load what the run's report prints with meanwhile.
        import rich.console  # noqa: F401

        import ipuexp.report.console  # noqa: F401

        if join():
            _record_charts(ev, out)
        else:
            charts_aside(ev, out)()

    return done
