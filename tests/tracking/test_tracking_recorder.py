"""A sweep's runs written by its recorder (ipuexp.tracking.recorder) are the runs its jobs write themselves."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mlflow import MlflowClient

JOB = Path(__file__).with_name("recorder_job.py")
PER_SWEEP = ("sweep_dir", "sweep_key", "sweep_driver_process", "mlflow.parentRunId")


def _sweep(tmp_path: Path, mode: str) -> str:
    uri = f"sqlite:///{tmp_path / mode / 'mlflow.db'}"
    (tmp_path / mode).mkdir()
    proc = subprocess.run([sys.executable, str(JOB), uri, str(tmp_path / mode / "sweep"), mode], cwd=tmp_path / mode,
                          capture_output=True, text=True)
    assert proc.returncode == (-9 if mode == "gone" else 0), proc.stderr[-3000:]
    return uri


def _runs(uri: str) -> dict:
    c = MlflowClient(uri)
    (exp,) = [e for e in c.search_experiments() if e.name in ("test", "bert_base")]
    runs = c.search_runs([exp.experiment_id])
    names = {r.info.run_id: r.info.run_name for r in runs}
    out = {}
    for r in runs:
        artifacts = {a.path: c.download_artifacts(r.info.run_id, a.path, str(Path(uri[10:]).parent / r.info.run_id))
                     for a in c.list_artifacts(r.info.run_id)}
        out[r.info.run_name] = {
            "status": r.info.status, "params": r.data.params, "metrics": r.data.metrics,
            "history": [(m.value, m.step) for m in c.get_metric_history(r.info.run_id, "loss")],
            "tags": {k: v for k, v in r.data.tags.items() if k not in PER_SWEEP},
            "parent": names.get(r.data.tags.get("mlflow.parentRunId")),
            "artifacts": {p: Path(f).read_text().splitlines()[-1] for p, f in artifacts.items()},
            "times": (r.info.start_time, r.info.end_time)}
    return out


def test_the_recorders_runs_are_the_ones_the_jobs_write(tmp_path: Path):
    direct, recorded = _runs(_sweep(tmp_path, "direct")), _runs(_sweep(tmp_path, "recorder"))
    assert sorted(direct) == sorted(recorded) == ["gradient_accumulation=16", "gradient_accumulation=32",
                                                  "gradient_accumulation=64", "sweep options.gradient_accumulation"
                                                                              "=16,32,64"]
    for name, run in direct.items():
        mine = recorded[name]
        assert {k: v for k, v in mine.items() if k != "times"} == {k: v for k, v in run.items() if k != "times"}, name
    parent = recorded["sweep options.gradient_accumulation=16,32,64"]
    assert parent["status"] == "FAILED" and parent["tags"]["sweep_command"]
    assert recorded["gradient_accumulation=32"]["status"] == "FAILED"
    assert recorded["gradient_accumulation=32"]["tags"]["error"] == "ValueError: boom"
    assert recorded["gradient_accumulation=32"]["artifacts"]["error.txt"] == "ValueError: boom"
    assert recorded["gradient_accumulation=64"]["status"] == "KILLED"
    assert recorded["gradient_accumulation=16"]["artifacts"] == {"config.yaml": "config.yaml", "pipeline.png":
                                                                 "pipeline.png", "result.json": "result.json"}
    for name, run in recorded.items():  # each run keeps the job's own times, inside its parent's
        if run["parent"]:
            assert parent["times"][0] <= run["times"][0] <= run["times"][1] <= parent["times"][1]


def test_a_driver_killed_outright_leaves_its_recorder_to_close_the_sweep(tmp_path: Path):
    runs = _runs(_sweep(tmp_path, "gone"))
    parent = runs.pop("sweep options.gradient_accumulation=16,32,64")
    assert parent["status"] == "KILLED"
    assert parent["tags"]["error"] == "its sweep's driver process ended without closing it"
    assert {name: run["status"] for name, run in runs.items()} == {"gradient_accumulation=16": "FINISHED"}
    assert not (tmp_path / "gone" / "sweep" / ".mlflow-sweep.lock").exists()


class _FailingRecorder:
    """A recorder whose store failed: what the job sends it is lost, and it says so."""

    def __init__(self):
        self.sent = []

    def send(self, record):
        self.sent.append(record)

    def wait_run(self):
        return None, "database is locked"


def test_a_single_run_whose_store_failed_in_its_recorder_is_one_line_naming_the_result_kept(make_cfg, tmp_path):
    import pytest

    from ipuexp.tracking import JobTracking
    from ipuexp.tracking.deferred import deferred_job
    from ipuexp.tracking.runs import StoreFailed

    kept = tmp_path / "result.json"
    kept.write_text("{}")
    recorder = _FailingRecorder()
    with deferred_job(JobTracking.of(make_cfg()), recorder, None) as run:
        run.log_artifact(str(kept))
    with pytest.raises(StoreFailed) as failed:  # said when the run's id is asked for, after the run's tables
        run.run_id
    assert str(failed.value).endswith(f"the tracking store failed as the run ended (database is locked); the run's "
                                      f"result is kept in {kept}")
    (record,) = recorder.sent
    assert record.reply and record.status == "FINISHED" and record.files == [(str(kept), None)]
    with pytest.raises(ValueError, match="boom"):  # the job's own error wins over the store's
        with deferred_job(JobTracking.of(make_cfg()), recorder, None):
            raise ValueError("boom")
    assert recorder.sent[-1].status == "FAILED" and "error.txt" in recorder.sent[-1].texts


DRIVER = """
import atexit, sys
import ipuexp.commands.run as cli
atexit.register(lambda: print("driver imported mlflow:", "mlflow" in sys.modules))
sys.argv = ["ipuexp"]
cli.main(sys.argv[1:] + {args!r})
"""


def test_python_m_ipuexp_sweep_records_from_its_recorder_and_never_imports_mlflow(tmp_path: Path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["-m", "+recipe=bert_base", "options.gradient_accumulation=16,32", f"tracking.uri={uri}",
            "hydra.sweep.dir=sweep"]
    proc = subprocess.run([sys.executable, "-c", DRIVER.format(args=args)], cwd=tmp_path, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "driver imported mlflow: False" in proc.stdout
    assert "Compare the sweep's 2 runs:" in proc.stdout  # the links, said by the recorder as the sweep ends
    # The comparison's address names every run: it is a page in the sweep folder, the console names the page.
    assert "open sweep/mlflow_compare.html" in " ".join(proc.stdout.split())
    page = (tmp_path / "sweep" / "mlflow_compare.html").read_text()
    assert "#/compare-runs?runs=" in page and "compare-runs" not in proc.stdout
    runs = _runs(uri)
    parent = runs.pop("sweep options.gradient_accumulation=16,32")
    assert parent["status"] == "FINISHED" and parent["tags"]["sweep_command"]
    assert {name: (run["status"], run["parent"]) for name, run in runs.items()} == {
        f"gradient_accumulation={ga}": ("FINISHED", "sweep options.gradient_accumulation=16,32") for ga in (16, 32)}
    assert all(sorted(run["artifacts"]) == ["config.yaml", "result.json"] for run in runs.values())
    assert not (tmp_path / "sweep" / ".mlflow-sweep.lock").exists()


def test_a_single_run_prints_the_id_of_the_run_its_recorder_wrote(tmp_path: Path):
    import re

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["+recipe=bert_base", f"tracking.uri={uri}", "hydra.run.dir=out"]
    proc = subprocess.run([sys.executable, "-c", DRIVER.format(args=args)], cwd=tmp_path, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "driver imported mlflow: False" in proc.stdout
    said = re.search(r"MLflow run ([0-9a-f]{32}) in experiment 'bert_base'", proc.stdout)
    run = MlflowClient(uri).get_run(said.group(1))
    assert run.info.status == "FINISHED" and run.data.metrics["throughput_samples_per_s"] > 0
