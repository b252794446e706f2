"""The ``ipuexp`` launcher's small sweeps, run in this process: the same folders, MLflow runs, one progress line
per point and one summary as on Ray, and no Ray started."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hydra.core.utils import JobStatus

from ipuexp.runner.errors import JobFailedError
from ipuexp.runner.placement import IN_PROCESS_BELOW as BELOW

HERE = ["hydra/launcher=ipuexp", "hydra/sweeper=ipuexp"]


def _no_ray_running() -> bool:
    ray = sys.modules.get("ray")
    return ray is None or not ray.is_initialized()


def task(cfg: Any) -> Any:
    if cfg.a == 2:
        raise ValueError("a=2 is not allowed here")
    return {"a": cfg.a}


def test_points_run_here_with_one_line_each(app: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
                                            multirun) -> None:
    sweep = tmp_path / "sweep"
    with pytest.raises(JobFailedError, match="^ValueError: a=2 is not allowed here$"):
        multirun(app, HERE + [f"hydra.sweep.dir={sweep}", "a=0,1,2,3"], task)
    out = capsys.readouterr().out
    flat = " ".join(out.split())  # lines break between words to fit the terminal
    assert f"Launching 4 jobs in this process (4 points, fewer than hydra.launcher.in_process_below={BELOW}" in flat
    progress = [ln for ln in out.splitlines() if "] #" in ln]
    assert [ln.split("[HYDRA] ")[1] for ln in progress] == [
        "[1/4] #0 done (a=0)", "[2/4] #1 done (a=1)", "[3/4] #2 failed: ValueError: a=2 is not allowed here (a=2)",
        "[4/4] #3 done (a=3)"]
    # Every point ran (the failure did not stop the sweep), then one summary with the failure and its log file.
    assert out.count("Sweep ") == 1 and f"Sweep {sweep}: 3 done, 1 failed, 0 out of memory" in flat
    assert f"#2 failed: ValueError: a=2 is not allowed here (traceback in {sweep}/2/test.log)" in flat
    assert "4 jobs in" in flat and "1 at a time" in flat
    # The traceback is in the job's log, not on the console.
    assert "Traceback" not in out and "Traceback" in (sweep / "2" / "test.log").read_text()
    assert all((sweep / str(i) / ".hydra" / "overrides.yaml").is_file() for i in range(4))
    assert _no_ray_running()


def test_returns_in_order(app: Path, tmp_path: Path, launch) -> None:
    rets = launch(app, HERE + [f"hydra.sweep.dir={tmp_path / 'sweep'}"], [["a=3"], ["a=2"], ["+b=1"]], task)
    assert [r.status for r in rets] == [JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.COMPLETED]
    assert rets[0].return_value == {"a": 3} and rets[2].return_value == {"a": 0}
    assert all(r.timing.task_s >= 0 for r in rets)


def test_interrupt_prints_what_finished(app: Path, tmp_path: Path, capsys: pytest.CaptureFixture, multirun) -> None:
    def interrupted(cfg: Any) -> Any:
        if cfg.a == 1:
            raise KeyboardInterrupt
        return cfg.a

    with pytest.raises(KeyboardInterrupt):
        multirun(app, HERE + [f"hydra.sweep.dir={tmp_path / 'sweep'}", "a=0,1,2"], interrupted)
    out = " ".join(capsys.readouterr().out.split())
    assert out.count("Interrupted sweep") == 1 and "1 done, 0 failed, 0 out of memory" in out


@pytest.mark.slow
def test_ipuexp_sweep_here_is_tracked_without_tables(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                     multirun) -> None:
    """A real sweep of the default launcher: MLflow's parent and child runs as on Ray, no job prints its tables."""
    from mlflow import MlflowClient

    from ipuexp.app import run_job
    from ipuexp.config.store import CONF_DIR

    db = tmp_path / "mlflow.db"
    overrides = ["+recipe=bert_base", "options.gradient_accumulation=64,128", "data.micro_batch_size=16,64",
                 f"tracking.uri=sqlite:///{db}", "tracking.experiment=here", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    rets = multirun(CONF_DIR, overrides, run_job)
    assert [r.status for r in rets] == [JobStatus.COMPLETED] * 4
    out = capsys.readouterr().out
    flat = " ".join(out.split())
    assert "Launching 4 jobs in this process" in flat and "2 done, 0 failed, 2 out of memory" in flat
    assert "Memory per IPU" not in out and "Throughput:" not in out  # a point's tables are for single runs
    assert out.count("Best fitting point: #") == 1
    c = MlflowClient(f"sqlite:///{db}")
    runs = c.search_runs([c.get_experiment_by_name("here").experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(children) == 4 and {r.info.status for r in children} == {"FINISHED"}
    assert sorted(r.data.metrics["fits"] for r in children) == [0.0, 0.0, 1.0, 1.0]
    assert _no_ray_running()
