"""One configuration through the engine: its graph (captured or read from the cache), execution plan, memory,
step timing and error band, as the :class:`~ipuexp.result.Result` a job records, with what its charts are drawn
from. No files are written here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional

from ipuexp.calibration.band_ends import inside
from ipuexp.config.schema import ExperimentConfig
from ipuexp.result import MeasuredFigures, Result, RunFigures


@dataclass
class Evaluation:
    """A result and what its charts are drawn from."""

    result: Result
    liveness: List[Any] = field(default_factory=list)
    plan: Any = None
    graph: Any = None
    events: Any = None
    """The step's events as columns (``emulator.events.EventRows``, for the trace and the Gantt chart), once made
    (:meth:`step_events`)."""

    def step_events(self) -> Any:
        """The step's events: hundreds of thousands for a long step, so they are made where the charts are drawn
        (a forked process), not before the answer, best with cyclic collection paused. The result never depends on
        them."""
        if self.events is None and self.plan is not None:
            from ipuexp.emulator.timing import step_rows

            self.events = step_rows(self.plan, self.graph)
        return self.events


def evaluate(exp: ExperimentConfig, cache_dir: Optional[str] = None) -> Evaluation:
    """Run the analytic engine for a validated ExperimentConfig object; no files written. The step's events, for the
    charts, come later (``Evaluation.step_events``) from a simulation of their own, cycle by cycle, whose sums may
    differ in the last bits from the memoised one every sweep point and fit uses: the result never uses them."""
    from ipuexp.calibration.band import error_band
    from ipuexp.calibration.user import residuals_for
    from ipuexp.emulator.memory import liveness_of, memory_figures, plan_ipus
    from ipuexp.emulator.model_figures import model_figures
    from ipuexp.emulator.position import point_of
    from ipuexp.emulator.timing import analyse
    from ipuexp.emulator.timing import figures as throughput_figures
    from ipuexp.execution.execution import plan_for
    from ipuexp.runner.captures import capture

    graph = capture(exp.model, exp.data.micro_batch_size, cache_dir=cache_dir or exp.engine.cache_dir)
    plan = plan_for(exp, graph)
    figures = model_figures(graph, plan.stages, exp.options.precision, exp.training)
    ipu_plans = plan_ipus(plan, graph)
    memory = memory_figures(ipu_plans, plan)
    step = analyse(plan, graph)
    throughput = throughput_figures(step)
    band = error_band(graph.model, len(plan.ipus) * plan.replicas, plan.micro_batch_size,
                      int(exp.options.gradient_accumulation), ipu=str(plan.ipu.name),
                      residuals=residuals_for(exp.calibration), point=point_of(exp.model, graph.model, plan, memory))
    if band is not None:
        throughput.error_band_pct = band.pct
        throughput.error_band_reasons = list(band.reasons)
        throughput.error_band_summary = list(band.summary)
        throughput.extrapolated = band.extrapolated
    result = Result(recipe=exp.recipe, model=figures, fits=memory.fits, memory=memory, throughput=throughput)
    result.measured = measured_figures(exp, result)
    result.run = run_figures(exp, plan, graph.model)
    return Evaluation(result=result, liveness=liveness_of(ipu_plans), plan=plan, graph=graph)


def run_figures(exp: ExperimentConfig, plan: Any, graph_model: str) -> RunFigures:
    """What ran, for the console's first line and ``result.json``."""
    from ipuexp.emulator.position import elements_per_micro_batch

    kind = elements_per_micro_batch(exp.model, graph_model, plan.micro_batch_size)[1]
    seq = int(exp.model.sequence_length) if kind == "tokens" and exp.model.name != "custom" else None
    return RunFigures(micro_batch_size=int(plan.micro_batch_size), replicas=int(plan.replicas),
                      ipus_per_replica=len(plan.ipus), gradient_accumulation=int(exp.options.gradient_accumulation),
                      device_iterations=int(exp.options.device_iterations), system=str(exp.system.name),
                      system_ipus=int(exp.system.num_ipus), sequence_length=seq,
                      auto_round=bool(exp.options.auto_round_num_ipus))


def measured_figures(exp: ExperimentConfig, result: Result) -> Optional[MeasuredFigures]:
    """``measured.*`` beside the prediction: the ratios, and whether the throughput lies in the error band."""
    m = exp.measured
    if m.samples_per_s is None and m.ipu_memory_bytes is None:
        return None
    out = MeasuredFigures(samples_per_s=m.samples_per_s, ipu_memory_bytes=m.ipu_memory_bytes)
    t = result.throughput
    if m.samples_per_s is not None and t is not None:
        # Packed data: a sample is a pack, and a measured rate counts sequences (as Graphcore's MLPerf logs do).
        rate = t.sequences_per_s if t.sequences_per_s is not None else t.samples_per_s
        out.over_predicted = m.samples_per_s / rate
        if t.error_band_pct is not None:
            out.in_band = inside(rate, m.samples_per_s, t.error_band_pct)
    if m.ipu_memory_bytes is not None and result.memory is not None and result.memory.ipus:
        out.memory_over_predicted = m.ipu_memory_bytes / max(i.total_bytes for i in result.memory.ipus)
    return out
