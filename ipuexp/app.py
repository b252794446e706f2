"""One job: config -> graph capture -> engine -> result.json, charts, console table, MLflow run."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional

from omegaconf import DictConfig, OmegaConf

from ipuexp.result import Result, Skipped

log = logging.getLogger("ipuexp")


@dataclass
class Evaluation:
    """A result and the series its charts are drawn from."""

    result: Result
    liveness: List[Any] = field(default_factory=list)
    events: List[Any] = field(default_factory=list)
    """Per-IPU events of one step (for the trace and the Gantt chart), when asked for."""


def evaluate(exp: Any, cache_dir: Optional[str] = None, with_events: bool = False) -> Evaluation:
    """Run the analytic engine for a validated ExperimentConfig object; no files written."""
    from ipuexp.engine.memory import liveness_of, memory_figures, plan_ipus
    from ipuexp.engine.model_figures import model_figures
    from ipuexp.engine.timing import analyse
    from ipuexp.engine.timing import figures as throughput_figures
    from ipuexp.runner.captures import capture
    from ipuexp.graph.stages import assign_stages

    graph = capture(exp.model, exp.data.micro_batch_size, cache_dir=cache_dir or exp.engine.cache_dir)
    pipe = exp.options.pipeline
    stages = assign_stages(graph.blocks, pipe.layers_per_ipu, pipe.device_mapping)
    figures = model_figures(graph, stages, exp.options.precision, exp.training)
    plans = plan_ipus(exp, graph, stages)
    memory = memory_figures(plans, exp)
    step = analyse(exp, graph, stages, record_events=with_events)
    result = Result(recipe=exp.recipe, model=figures, fits=memory.fits, memory=memory,
                    throughput=throughput_figures(step))
    return Evaluation(result=result, liveness=liveness_of(plans), events=step.events)


def _save_charts(ev: Evaluation, out: Path) -> None:
    from ipuexp.report.gantt import draw_gantt
    from ipuexp.report.memory_chart import save_liveness_chart, save_memory_chart
    from ipuexp.report.trace import write_trace

    result = ev.result
    title = f"{result.recipe or result.model.name}: one step"
    result.artifacts["trace"] = str(Path(write_trace(ev.events, out / "trace.json.gz", title=title)).resolve())
    result.artifacts["gantt"] = str(Path(draw_gantt(ev.events, out / "pipeline.png", title=title)).resolve())
    result.artifacts["memory_chart"] = str(Path(save_memory_chart(result.memory, out / "memory.png")).resolve())
    worst = max(result.memory.ipus, key=lambda m: m.max_tile_bytes)
    path = save_liveness_chart(ev.liveness, out / "liveness.png", capacity_bytes=worst.capacity_bytes,
                               title=f"Liveness, IPU {worst.ipu}")
    result.artifacts["liveness_chart"] = str(Path(path).resolve())


def _wants_charts(exp: Any) -> bool:
    mode = exp.report.charts.value
    if mode != "auto":
        return mode == "always"
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return not (HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN)


def run_job(cfg: DictConfig, out_dir: str | Path = ".") -> Result | Skipped:
    """Validate, evaluate, write ``result.json`` and charts into ``out_dir`` and track the run.

    Returns ``Skipped`` when the configuration already has a FINISHED run in MLflow and need not run again
    (``ipuexp.tracking.resume.already_completed``)."""
    from ipuexp.config.validate import validate
    from ipuexp.report.console import print_result
    from ipuexp.tracking import already_completed, track_job

    for warning in validate(cfg):
        log.warning(warning)
    if already_completed(cfg):
        log.info("skipped: this configuration already has a FINISHED run in MLflow (tracking.skip_completed=true, "
                 "or a re-run of a sweep that lost its Ray cluster)")
        return Skipped()
    exp = OmegaConf.to_object(cfg)
    out = Path(out_dir)
    with track_job(cfg) as run:
        charts = _wants_charts(exp)
        ev = evaluate(exp, with_events=charts)
        result = ev.result
        if charts:
            _save_charts(ev, out)
        if exp.engine.mode.value == "functional":
            from ipuexp.engine.functional import run_functional
            from ipuexp.engine.functional.checkpoint import latest

            result.functional = run_functional(exp, tracker=run, out_dir=out,
                                               predicted_samples_per_s=result.throughput.samples_per_s)
            ckpt = latest(out)
            if ckpt is not None:
                result.artifacts["checkpoint"] = str(ckpt.resolve())
        (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
        result.artifacts["config"] = str((out / "config.yaml").resolve())
        path = out / "result.json"
        result.artifacts["result"] = str(path.resolve())
        path.write_text(json.dumps(result.to_dict(), indent=2))
        run.log_result(result)
    print_result(result)
    return result
