"""End-to-end: ``python -m ipuexp`` as a user runs it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", "ipuexp", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def bert_large_run(tmp_path_factory):
    """One real run of the main job, tracked in MLflow's default store (sqlite mlflow.db in the launch dir)."""
    cwd = tmp_path_factory.mktemp("cli")
    proc = run_cli("+recipe=bert_large", "hydra.run.dir=run", cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cwd, proc


def test_main_job_writes_result_json(bert_large_run):
    cwd, _ = bert_large_run
    result = json.loads((cwd / "run" / "result.json").read_text())
    assert 334e6 <= result["model"]["parameters"] <= 345e6
    # Training FLOPs per sample of BERT-Large at sequence 128: about 6 x parameters x tokens.
    assert result["model"]["flops_per_sample"] == pytest.approx(6 * result["model"]["parameters"] * 128, rel=0.10)
    assert len(result["model"]["ipus"]) == 4
    assert result["fits"] is True
    for name in ("memory.png", "liveness.png", "config.yaml"):
        assert (cwd / "run" / name).stat().st_size > 0


def test_main_job_prints_per_ipu_table(bert_large_run):
    _, proc = bert_large_run
    out = proc.stdout
    for header in ("IPU", "parameters", "FLOPs", "saved", "boundary"):
        assert header in out
    assert "bert_large" in out


def test_main_job_says_where_it_wrote_and_logs_its_report(bert_large_run):
    cwd, proc = bert_large_run
    lines = " ".join(proc.stdout.split())
    assert f"Wrote result.json, config.yaml" in lines and f"to run{os.sep}" in lines
    assert "MLflow run " in lines and "in experiment 'bert_large'" in lines
    log = (cwd / "run" / "__main__.log").read_text()
    assert "Throughput:" in log and "Wrote result.json" in log
    # no empty record opens the log: the record's header stands on the report's first line
    assert all(not line.endswith("[ipuexp-record][INFO] -") for line in log.splitlines())
    assert "[ipuexp-record][INFO] - Ran: " in log


def test_main_job_is_tracked_in_default_store(bert_large_run):
    import mlflow

    cwd, _ = bert_large_run
    db = cwd / "mlflow.db"
    assert db.exists(), "the default store is sqlite mlflow.db in the launch directory"
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.get_experiment_by_name("bert_large")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.params["options.gradient_accumulation"] == "2048"
    assert run.data.params["model"] == "bert_large" and run.data.params["system"] == "pod16"
    result = json.loads((cwd / "run" / "result.json").read_text())
    assert run.data.metrics["throughput_samples_per_s"] == pytest.approx(result["throughput"]["samples_per_s"])
    assert run.data.metrics["fits"] == 1.0
    # the rest of the result, and the whole config, are the run's artifacts
    assert "model.parameters" not in run.data.metrics and "options.pipeline.layers_per_ipu" not in run.data.params
    assert {"result.json", "config.yaml"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
    back = json.loads(Path(client.download_artifacts(run.info.run_id, "result.json", str(cwd / "back"))).read_text())
    assert back["model"]["parameters"] == pytest.approx(336.2e6, rel=0.01)


@pytest.mark.parametrize("override, key", [
    ("options.io.num_io_tiles=7", "options.io.num_io_tiles"),
    ("options.bogus=1", "options.bogus"),
    ("options.replication_factor=two", "options.replication_factor"),
    ("ipu=mk9", "ipu"),
])
def test_config_errors_are_one_line_exit_2(tmp_path, override, key):
    proc = run_cli("+recipe=bert_large", override, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "mlflow.db").exists(), "a rejected config records nothing"


def test_preflight_imports_no_heavy_module():
    code = ("import sys; from ipuexp.commands.run import preflight; preflight(['+recipe=bert_large']); "
            "print([m for m in ('torch', 'mlflow', 'ray', 'matplotlib') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
