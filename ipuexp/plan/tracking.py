"""The plan in MLflow: a parent run with the search's figures and files, one child run per top candidate."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

from ipuexp.plan import space as sp
from ipuexp.plan.evaluate import Outcome
from ipuexp.plan.planner import Plan


def _metrics(o: Outcome) -> Dict[str, float]:
    return {"throughput_samples_per_s": o.samples_per_s, "step_time_s": o.step_time_s,
            "peak_ipu_memory_bytes": float(o.peak_ipu_bytes), "peak_tile_memory_bytes": float(o.peak_tile_bytes),
            "tile_headroom_bytes": float(o.tile_memory_bytes - o.peak_tile_bytes),
            "ipu_headroom_bytes": float(o.ipu_capacity_bytes - o.peak_ipu_bytes), "fits": float(o.fits)}


def track_plan(plan: Plan, top: List[Outcome], paths: Dict[str, Path]) -> str:
    """Record the plan; returns the parent run's id. The parent ends FINISHED, or FAILED if recording fails."""
    import time

    from mlflow.entities import Metric, Param

    from ipuexp.tracking.store import client, experiment_id, experiment_name, retry, tracking_uri

    base = plan.base
    uri = tracking_uri(base)
    c = client(uri)
    exp_id = experiment_id(c, experiment_name(base), uri)
    st = plan.result.stats
    now = int(time.time() * 1000)
    parent = retry(c.create_run, exp_id, run_name=f"plan {base.recipe or base.model.name} {base.system.name}",
                   tags={"ipuexp.kind": "plan", "recipe": str(base.recipe), "system": base.system.name,
                         "ipu": base.ipu.name})
    pid = parent.info.run_id
    try:
        params = {"global_batch": plan.problem.global_batch, "batch_tolerance": plan.problem.batch_tolerance,
                  "headroom": plan.settings.headroom, "search": st.method, "fix": ",".join(plan.settings.fix)}
        metrics = {"candidates": st.candidates, "evaluated": st.evaluated, "pruned": st.pruned,
                   "search_seconds": st.seconds, "recipe_throughput_samples_per_s": plan.result.recipe.samples_per_s}
        if top:
            metrics["best_throughput_samples_per_s"] = top[0].samples_per_s
        retry(c.log_batch, pid, metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
              params=[Param(k, str(v)) for k, v in params.items()])
        for path in paths.values():
            retry(c.log_artifact, pid, str(path))
        for rank, o in enumerate(top, 1):
            changes = sp.differences(o.candidate, plan.problem.recipe)
            child = retry(c.create_run, exp_id, run_name=f"#{rank} " + (" ".join(changes)[:200] or "recipe"),
                          tags={"mlflow.parentRunId": pid, "ipuexp.kind": "plan_candidate", "rank": str(rank)})
            retry(c.log_batch, child.info.run_id,
                  metrics=[Metric(k, v, now, 0) for k, v in _metrics(o).items()],
                  params=[Param(k, v) for k, v in (ch.split("=", 1) for ch in changes)])
            retry(c.set_terminated, child.info.run_id, "FINISHED")
    except BaseException:
        retry(c.set_terminated, pid, "FAILED")
        raise
    retry(c.set_terminated, pid, "FINISHED")
    return pid
