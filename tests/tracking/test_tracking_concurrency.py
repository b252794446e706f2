import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient
from tracking_fixtures import sample_result

from ipuexp.tracking import curated

WRITER = Path(__file__).with_name("concurrent_writer.py")
WORKERS, RUNS, STEPS = 8, 3, 20


@pytest.mark.slow
def test_parallel_jobs_writing_one_sqlite_store_lose_nothing(tmp_path: Path):
    db_uri = f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}"  # no schema yet: the writers race to create it
    sweep_dir, go = tmp_path / "sweep", tmp_path / "go"
    sweep_dir.mkdir()
    procs = [subprocess.Popen([sys.executable, str(WRITER), db_uri, str(sweep_dir), str(w), str(RUNS), str(STEPS),
                               str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in range(WORKERS)]
    time.sleep(1.0)
    go.touch()
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    retries = sum(int(out.split()[-1]) for out, _ in outs)
    print(f"{WORKERS} writers, {WORKERS * RUNS} runs, {retries} lock retries")

    c = MlflowClient(db_uri)
    exp = c.get_experiment_by_name("concurrent").experiment_id
    runs = c.search_runs([exp], max_results=1000)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1, "all writers must agree on one parent run"
    assert parents[0].info.status == "FINISHED"
    assert len(children) == WORKERS * RUNS
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert all(r.info.status == "FINISHED" for r in children)
    assert sorted(int(r.data.params["options.gradient_accumulation"]) for r in children) == \
        list(range(1, WORKERS * RUNS + 1))
    figures = curated.metrics(sample_result(), 638976)
    for r in children:
        assert set(r.data.metrics) == set(figures) | {"loss", "accuracy"}
        assert r.data.metrics["throughput_samples_per_s"] == float(r.data.params["options.gradient_accumulation"])
        assert [m.step for m in c.get_metric_history(r.info.run_id, "loss")] == list(range(1, STEPS + 1))
    # every metric value ever logged, counted in the database itself
    with sqlite3.connect(db_uri[len("sqlite:///"):]) as db:
        (rows,) = db.execute("select count(*) from metrics").fetchone()
    assert rows == WORKERS * RUNS * (len(figures) + 2 * STEPS)
