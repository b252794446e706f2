"""A sweep of a script: one job per point, each stopped after its prediction, under one MLflow parent run."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.poptorch.helpers import MNIST

ROOT = Path(__file__).resolve().parents[2]


def test_predict_only_sweep(tmp_path):
    env = dict(os.environ, COLUMNS="100", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "ipuexp.poptorch", "--predict-only", "-m", "--system", "pod4",
                           str(MNIST), "--", "options.gradient_accumulation=10,20"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 done, 0 failed" in proc.stdout
    assert "Epoch 2/10" not in proc.stdout  # stopped at the first call
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("mnist_pipelining")
    runs = client.search_runs([experiment.experiment_id])
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 2 and len({r.data.tags["mlflow.parentRunId"] for r in children}) == 1
    rates = sorted(r.data.metrics["throughput_samples_per_s"] for r in children)
    assert rates[1] > rates[0]  # more accumulation, a smaller share of the step in the pipeline's ramps
    params = {r.data.params.get("options.gradient_accumulation") for r in children}
    assert params == {"10", "20"}
