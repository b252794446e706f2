"""The plan in MLflow: a parent run with the search's settings, figures and files, one child run per top candidate.

The parent run is opened before the search and always ends: FINISHED with a fitting best, FAILED (with the
one-line reason as ``ipuexp.failure``) when nothing fits, the input is refused, the search raises or is
interrupted. The figure names are the ones a job's run records (``tracking.curated``), so candidates and jobs
compare in one MLflow table.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from ipuexp.config.schema import ExperimentConfig
from ipuexp.plan.candidate import differences, param_values
from ipuexp.plan.evaluate import Outcome
from ipuexp.plan.planner import Plan
from ipuexp.plan.settings import PlanConfig

FAILURE_TAG = "ipuexp.failure"


def _metrics(o: Outcome) -> Dict[str, float]:
    out = {"throughput_samples_per_s": o.samples_per_s, "step_time_s": o.step_time_s,
           "peak_ipu_memory_bytes": float(o.peak_ipu_bytes), "peak_tile_memory_bytes": float(o.peak_tile_bytes),
           "tile_headroom_bytes": float(o.tile_memory_bytes - o.peak_tile_bytes),
           "ipu_headroom_bytes": float(o.ipu_capacity_bytes - o.peak_ipu_bytes), "fits": float(o.fits)}
    if o.band_pct is not None:
        out["error_band_pct"] = o.band_pct
    return out


class PlanRecord:
    """The MLflow parent run of one ``python -m ipuexp.plan``, recorded from this process (``PlanRun`` runs it in a
    forked one)."""

    def __init__(self, base: ExperimentConfig, settings: PlanConfig, overrides: List[str]):
        from mlflow.entities import Param

        from ipuexp.calibration.user import tag_of
        from ipuexp.tracking.identity import clip_tag
        from ipuexp.tracking.store import client, experiment_id, experiment_name, retry, tracking_uri

        self._retry = retry
        uri = tracking_uri(base)
        self.client = c = client(uri)
        self.experiment_name = experiment_name(base)
        """The experiment's name, as a run's report gives it (its id is MLflow's number for it)."""
        self.experiment_id = experiment_id(c, self.experiment_name, uri)
        label = base.recipe or base.model.name
        self.calibration_tags = tag_of(base.calibration, base.ipu.calibration or {})
        run = retry(c.create_run, self.experiment_id, run_name=f"plan {label} {base.system.name}",
                    tags={"ipuexp.kind": "plan", "recipe": str(base.recipe), "system": base.system.name,
                          "ipu": base.ipu.name, "ipuexp.overrides": clip_tag(" ".join(overrides)),
                          **self.calibration_tags})
        self.run_id = run.info.run_id
        self.ended = False
        params = {f"plan.{k}": (",".join(v) if isinstance(v, list) else v) for k, v in vars(settings).items()
                  if k not in ("out_dir", "workers")}
        params.update({"recipe": base.recipe, "system": base.system.name, "ipu": base.ipu.name,
                       "model": base.model.name})
        self._call(c.log_batch, self.run_id, params=[Param(k, str(v)) for k, v in params.items()])

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return self._retry(fn, *args, **kwargs)

    def finish(self, plan: Plan, top: List[Outcome], paths: Dict[str, Path], failure: Optional[str] = None) -> str:
        """Record the search and the top candidates; FINISHED, or FAILED with ``failure`` (nothing fits)."""
        try:
            self._record(plan, top, paths)
        except BaseException as exc:
            self.fail(f"recording the plan failed: {type(exc).__name__}: {exc}")
            raise
        if failure:
            self.fail(failure)
        else:
            self._call(self.client.set_terminated, self.run_id, "FINISHED")
            self.ended = True
        return self.run_id

    def fail(self, reason: str) -> None:
        self._call(self.client.set_tag, self.run_id, FAILURE_TAG, reason[:5000])
        self._call(self.client.set_terminated, self.run_id, "FAILED")
        self.ended = True

    def _record(self, plan: Plan, top: List[Outcome], paths: Dict[str, Path]) -> None:
        from mlflow.entities import Metric, Param

        c = self.client
        st = plan.result.stats
        now = int(time.time() * 1000)
        metrics = {"global_batch": plan.problem.global_batch, "space_size": st.space_size,
                   "candidates": st.candidates, "evaluated": st.evaluated, "pruned": st.pruned,
                   "invalid": st.invalid, "refined": st.refined, "search_seconds": st.seconds,
                   "capture_seconds": plan.capture_s,
                   "recipe_throughput_samples_per_s": plan.result.recipe.samples_per_s,
                   "recipe_fits": float(plan.result.recipe.fits)}
        if top:
            metrics["best_throughput_samples_per_s"] = top[0].samples_per_s
            metrics["best_tile_headroom_bytes"] = float(top[0].tile_memory_bytes - top[0].peak_tile_bytes)
        self._call(c.log_batch, self.run_id, metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
                   params=[Param("search.method", st.method)])
        for path in paths.values():
            self._call(c.log_artifact, self.run_id, str(path))
        for rank, o in enumerate(top, 1):
            changes = differences(o.candidate, plan.problem.recipe)
            child = self._call(c.create_run, self.experiment_id,
                               run_name=f"#{rank} " + (" ".join(changes)[:200] or "the recipe"),
                               tags={"mlflow.parentRunId": self.run_id, "ipuexp.kind": "plan_candidate",
                                     "rank": str(rank), "changes": " ".join(changes)[:5000] or "none",
                                     **self.calibration_tags})
            try:
                self._call(c.log_batch, child.info.run_id,
                           metrics=[Metric(k, v, now, 0) for k, v in _metrics(o).items()],
                           params=[Param(k, v) for k, v in param_values(o.candidate).items()])
            except BaseException:
                self._call(c.set_terminated, child.info.run_id, "FAILED")
                raise
            self._call(c.set_terminated, child.info.run_id, "FINISHED")


class PlanRun:
    """``PlanRecord`` in a forked process, which imports MLflow, opens its store and the parent run while the search
    runs here (a second or two on the other core that the search would otherwise wait for); ``finish`` and ``fail``
    are sent to it and answered. An error it meets comes back as the exception it raised; where a platform has no
    ``fork``, the record is made here."""

    def __init__(self, base: ExperimentConfig, settings: PlanConfig, overrides: List[str]):
        from multiprocessing.connection import Pipe

        from ipuexp.tracking.store import experiment_name

        self.experiment_name = experiment_name(base)
        self.ended = False
        self._run_id: Optional[str] = None
        self._here: Optional[PlanRecord] = None
        self._opened = False
        if not hasattr(os, "fork"):
            self._here = PlanRecord(base, settings, overrides)
            self._run_id = self._here.run_id
            return
        self._conn, theirs = Pipe()
        self._pid = os.fork()
        if self._pid == 0:  # the child: record, answer, leave without the parent's exit handlers
            code = 1
            try:
                self._conn.close()
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent reports an interruption (``fail``)
                code = _record(theirs, base, settings, overrides)
            finally:
                os._exit(code)
        theirs.close()

    @property
    def run_id(self) -> str:
        self._open()
        return str(self._run_id)

    def _open(self) -> None:
        if self._here is None and not self._opened:
            self._opened = True
            try:
                self._run_id = self._answer()
            except BaseException:
                self.ended = True  # no run was opened: nothing to end
                self._close()
                raise

    def _answer(self) -> Any:
        try:
            kind, value = self._conn.recv()
        except EOFError:
            raise RuntimeError("the process recording the plan in MLflow ended without an answer") from None
        if kind == "error":
            raise value
        return value

    def finish(self, plan: Plan, top: List[Outcome], paths: Dict[str, Path], failure: Optional[str] = None) -> str:
        """``PlanRecord.finish``: the search and the top candidates; FINISHED, or FAILED with ``failure``."""
        if self._here is not None:
            rid = self._here.finish(plan, top, paths, failure)
        else:
            self._open()
            self._conn.send(("finish", (plan, top, paths, failure)))
            rid = self._answer()
            self._close()
        self.ended = True
        return rid

    def fail(self, reason: str) -> None:
        """``PlanRecord.fail``: FAILED with ``reason``."""
        if self._here is not None:
            self._here.fail(reason)
        else:
            self._open()
            if self.ended:
                return
            self._conn.send(("fail", (reason,)))
            self._answer()
            self._close()
        self.ended = True

    def _close(self) -> None:
        self._conn.close()
        try:
            os.waitpid(self._pid, 0)
        except ChildProcessError:
            pass


def _record(conn: Any, base: ExperimentConfig, settings: PlanConfig, overrides: List[str]) -> int:
    """The forked recorder: open the run, then carry out one ``finish`` or ``fail``; the parent ending first (its
    end of the pipe closed) fails the run."""
    import pickle

    try:
        record = PlanRecord(base, settings, overrides)
    except BaseException as exc:
        conn.send(("error", _sendable(exc, pickle)))
        return 1
    conn.send(("opened", record.run_id))
    try:
        kind, args = conn.recv()
    except EOFError:
        record.fail("the planner ended before it recorded its plan")
        return 1
    try:
        conn.send(("done", getattr(record, kind)(*args)))
    except BaseException as exc:
        conn.send(("error", _sendable(exc, pickle)))
        return 1
    return 0


def _sendable(exc: BaseException, pickle: Any) -> BaseException:
    """``exc`` if it survives pickling, else a RuntimeError with its one line (an MLflow or SQLAlchemy error the
    parent, which never imported MLflow, could not rebuild)."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
