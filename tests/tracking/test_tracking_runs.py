import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mlflow import MlflowClient

from ipuexp.tracking import JobTracking, SweepContext, curated, track_job
from ipuexp.tracking.identity import resolved


def runs(db_uri, experiment="test"):
    c = MlflowClient(db_uri)
    exp = c.get_experiment_by_name(experiment)
    return c, c.search_runs([exp.experiment_id]) if exp else []


def test_finished_run_holds_the_curated_params_and_metrics_tags_and_artifacts(make_cfg, result, db_uri,
                                                                             tmp_path: Path):
    cfg = make_cfg("options.gradient_accumulation=16")
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": []}))
    result.artifacts["trace"] = str(trace)
    (tmp_path / "pipeline.png").write_bytes(b"\x89PNG")
    result.artifacts["gantt"] = str(tmp_path / "pipeline.png")
    (tmp_path / "step-10.pt").write_bytes(b"weights")
    result.artifacts["checkpoint"] = str(tmp_path / "step-10.pt")  # stays in the job folder
    with track_job(JobTracking.of(cfg)) as run:
        run.log_result(result)
    c, (r,) = runs(db_uri)
    assert r.info.status == "FINISHED"
    # exactly the key options (no sweep: nothing swept) and the result's headline figures
    assert r.data.params == curated.params(resolved(cfg))
    assert set(r.data.params) == set(curated.KEY_OPTIONS)
    assert r.data.params["options.gradient_accumulation"] == "16" and r.data.params["model"] == "bert_large"
    assert r.data.metrics == pytest.approx(curated.metrics(result, cfg.ipu.memory_per_tile_bytes))
    assert set(r.data.metrics) == {"fits", "throughput_samples_per_s", "step_time_s", "peak_ipu_memory_bytes",
                                   "ipu_headroom_bytes", "peak_tile_memory_bytes", "tile_headroom_bytes"}
    assert r.data.metrics["throughput_samples_per_s"] == 1000.0
    assert r.data.tags["fits"] == "true"
    assert r.data.tags["config_hash"] and r.data.tags["ipu"] == "mk2"
    assert {a.path for a in c.list_artifacts(r.info.run_id)} == {"config.yaml", "trace.json", "pipeline.png"}
    config = c.download_artifacts(r.info.run_id, "config.yaml", str(tmp_path / "back"))
    assert "gradient_accumulation: 16" in Path(config).read_text()  # the whole config stays with the run
    assert "mlflow.parentRunId" not in r.data.tags


def test_a_job_in_a_driven_sweep_writes_three_times_and_looks_nothing_up(make_cfg, make_result, db_uri,
                                                                          tmp_path: Path, monkeypatch):
    from ipuexp.tracking.store import client, experiment_id
    from ipuexp.tracking.sweep import open_parent

    c = client(db_uri)
    sweep = SweepContext(dir=tmp_path / "sweep", swept_keys=["options.gradient_accumulation"])
    sweep.dir.mkdir()
    parent = open_parent(c, experiment_id(c, "test", db_uri), sweep, {}, driver=True)  # as the Hydra callback
    calls = []
    for method in ("create_run", "log_batch", "set_terminated", "search_runs", "get_experiment_by_name",
                   "update_run", "log_artifact", "log_text", "set_tag", "get_run"):
        real = getattr(c, method)
        monkeypatch.setattr(c, method, lambda *a, _m=method, _f=real, **k: calls.append(_m) or _f(*a, **k))
    for ga in (1, 2):
        sweep.job_overrides = [f"options.gradient_accumulation={ga}"]
        calls.clear()
        with track_job(JobTracking.of(make_cfg(f"options.gradient_accumulation={ga}"), sweep=sweep)) as run:
            run.log_result(make_result())
    # the second job of a worker: the store, experiment and parent are known; one batch holds params and metrics
    assert calls == ["create_run", "log_batch", "set_terminated"]
    c2 = MlflowClient(db_uri)
    assert c2.get_run(parent).info.status == "RUNNING"  # the driver closes it, not its jobs
    r = c2.get_run(run.run_id)
    assert r.info.status == "FINISHED" and r.info.run_name == "gradient_accumulation=2"
    assert r.data.tags["mlflow.parentRunId"] == parent
    assert {a.path for a in c2.list_artifacts(r.info.run_id)} == {"config.yaml"}


def test_out_of_memory_configuration_is_a_finished_run_tagged_fits_false(make_cfg, make_result, db_uri):
    with track_job(JobTracking.of(make_cfg())) as run:
        run.log_result(make_result(fits=False))
    _, (r,) = runs(db_uri)
    assert r.info.status == "FINISHED"
    assert r.data.tags["fits"] == "false"
    assert r.data.metrics["fits"] == 0.0
    assert "error" not in r.data.tags


def test_exception_marks_the_run_failed_with_the_error(make_cfg, db_uri):
    with pytest.raises(ValueError):
        with track_job(JobTracking.of(make_cfg())):
            raise ValueError("layers_per_ipu sums to 20, model has 24 layers")
    c, (r,) = runs(db_uri)
    assert r.info.status == "FAILED"
    assert r.data.tags["error"] == "ValueError: layers_per_ipu sums to 20, model has 24 layers"
    assert "error.txt" in {a.path for a in c.list_artifacts(r.info.run_id)}


def test_ctrl_c_marks_the_run_killed(make_cfg, db_uri):
    with pytest.raises(KeyboardInterrupt):
        with track_job(JobTracking.of(make_cfg())):
            raise KeyboardInterrupt
    _, (r,) = runs(db_uri)
    assert r.info.status == "KILLED"


def test_step_metrics_keep_their_history(make_cfg, db_uri):
    with track_job(JobTracking.of(make_cfg())) as run:
        for step in range(1, 1201):  # more than one batch of 1000
            run.log_step_metrics(step, {"loss": 1.0 / step, "accuracy": step / 1200})
    c, (r,) = runs(db_uri)
    history = c.get_metric_history(r.info.run_id, "loss")
    assert [m.step for m in history] == list(range(1, 1201))
    assert history[-1].value == pytest.approx(1 / 1200)
    assert r.data.metrics["accuracy"] == 1.0


def test_disabled_tracking_writes_nothing(make_cfg, result, db_uri):
    with track_job(JobTracking.of(make_cfg("tracking.enabled=false"))) as run:
        run.log_result(result)
        run.log_step_metrics(1, {"loss": 1.0})
    _, found = runs(db_uri)
    assert found == []


_CHILD = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {tests!r})
    from ipuexp.config.compose import compose_config as compose
    from ipuexp.tracking import JobTracking, track_job
    cfg = compose(["tracking.uri={uri}", "tracking.experiment=test"])
    mode = sys.argv[1]
    if mode == "signal":
        with track_job(JobTracking.of(cfg)):
            print("open", flush=True)
            time.sleep(60)
    else:  # the block never ends: only the atexit net can close the run
        cm = track_job(JobTracking.of(cfg))
        cm.__enter__()
        print("open", flush=True)
""")


@pytest.mark.parametrize("mode", ["signal", "atexit"])
def test_no_run_is_left_running_when_the_process_ends(mode, db_uri, tmp_path: Path):
    script = tmp_path / "child.py"
    script.write_text(_CHILD.format(tests=str(Path(__file__).parent), uri=db_uri))
    proc = subprocess.Popen([sys.executable, str(script), mode], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "open"
    if mode == "signal":
        os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == (128 + signal.SIGTERM if mode == "signal" else 0)
    _, (r,) = runs(db_uri)
    assert r.info.status == "KILLED"
    assert r.info.end_time is not None


def test_an_extrapolated_prediction_is_tagged_with_its_axes(make_cfg, make_result, db_uri):
    result = make_result()
    result.throughput.extrapolated = "16 IPUs per replica (rows: 1-8)"
    result.throughput.error_band_pct = 40.0
    with track_job(JobTracking.of(make_cfg())) as run:
        run.log_result(result)
    with track_job(JobTracking.of(make_cfg("options.gradient_accumulation=32"))) as run:
        run.log_result(make_result())
    _, found = runs(db_uri)
    tags = sorted(r.data.tags["extrapolated"] for r in found)
    assert tags == ["16 IPUs per replica (rows: 1-8)", "no"]
    assert any(r.data.metrics.get("error_band_pct") == 40.0 for r in found)
