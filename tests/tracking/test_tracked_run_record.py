"""A single tracked run records what it recorded before its charts and trace were written side by side: the same
parameters, metrics, tags and artifacts (names taken from the release before, ``+recipe=bert_base``)."""
from __future__ import annotations

import json
import subprocess
import sys

PARAMS = ["data.micro_batch_size", "ipu", "model", "options.available_memory_proportion", "options.device_iterations",
          "options.gradient_accumulation", "options.io.num_io_tiles", "options.pipeline.schedule",
          "options.recomputation.mode", "options.replication_factor", "system"]
METRICS = ["error_band_pct", "fits", "ipu_headroom_bytes", "mfu", "peak_ipu_memory_bytes", "peak_tile_memory_bytes",
           "step_time_s", "throughput_samples_per_s", "tile_headroom_bytes"]
TAGS = ["calibration", "calibration_hash", "config_hash", "engine_mode", "extrapolated", "fits", "git_commit", "ipu",
        "ipuexp_version", "model", "overrides", "recipe", "system"]
ARTIFACTS = ["config.yaml", "liveness.png", "memory.png", "pipeline.png", "result.json", "trace.json.gz"]


def test_a_tracked_run_keeps_every_param_metric_tag_and_artifact(tmp_path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = subprocess.run([sys.executable, "-m", "ipuexp", "+recipe=bert_base", "hydra.run.dir=out",
                           f"tracking.uri={uri}"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    c = MlflowClient(tracking_uri=uri)
    runs = [r for e in c.search_experiments() for r in c.search_runs([e.experiment_id])]
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert sorted(run.data.params) == PARAMS
    assert sorted(run.data.metrics) == METRICS
    assert sorted(k for k in run.data.tags if not k.startswith("mlflow.")) == TAGS
    assert sorted(a.path for a in c.list_artifacts(run.info.run_id)) == ARTIFACTS
    kept = json.loads((tmp_path / "out" / "result.json").read_text())["artifacts"]
    assert sorted(kept) == ["config", "gantt", "liveness_chart", "memory_chart", "result", "trace"]
    assert all((tmp_path / "out" / name).stat().st_size > 0 for name in ARTIFACTS)
