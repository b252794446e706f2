from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ipuexp.tracking import store


def test_relative_local_uris_are_anchored_at_the_launch_dir(tmp_path: Path):
    assert store.absolute_uri("sqlite:///mlflow.db", tmp_path) == f"sqlite:///{tmp_path}/mlflow.db"
    assert store.absolute_uri("sqlite:////abs/x.db", tmp_path) == "sqlite:////abs/x.db"
    assert store.absolute_uri("mlruns", tmp_path) == (tmp_path / "mlruns").as_uri()
    assert store.absolute_uri("http://127.0.0.1:5000", tmp_path) == "http://127.0.0.1:5000"
    assert store.absolute_uri("databricks", tmp_path) == "databricks"


def test_uri_precedence_config_then_environment_then_default(monkeypatch, tmp_path: Path):
    monkeypatch.chdir(tmp_path)
    cfg = OmegaConf.create({"tracking": {"uri": None}})
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert store.tracking_uri(cfg) == f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://example:5000")
    assert store.tracking_uri(cfg) == "http://example:5000"
    cfg.tracking.uri = "sqlite:///other.db"
    assert store.tracking_uri(cfg) == f"sqlite:///{tmp_path}/other.db"


def test_default_store_inside_a_hydra_job_is_the_launch_dir(tmp_path: Path, monkeypatch):
    from hydra.core.hydra_config import HydraConfig

    launch, job = tmp_path / "launch", tmp_path / "launch" / "outputs" / "job"
    job.mkdir(parents=True)
    monkeypatch.chdir(job)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    hc = OmegaConf.create({"hydra": {"runtime": {"cwd": str(launch)}}})
    monkeypatch.setattr(HydraConfig, "initialized", staticmethod(lambda: True))
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: hc.hydra))
    cfg = OmegaConf.create({"tracking": {"uri": None}})
    assert store.tracking_uri(cfg) == f"sqlite:///{launch}/mlflow.db"


def test_experiment_name_defaults_to_the_recipe():
    cfg = OmegaConf.create({"tracking": {"experiment": None}, "recipe": "bert_large",
                            "model": {"name": "bert", "size": "large"}})
    assert store.experiment_name(cfg) == "bert_large"
    cfg.recipe = None
    assert store.experiment_name(cfg) == "bert_large"
    cfg.tracking.experiment = "mine"
    assert store.experiment_name(cfg) == "mine"


def test_retry_repeats_lock_contention_only():
    from mlflow.exceptions import MlflowException

    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            try:
                raise RuntimeError("(sqlite3.OperationalError) database is locked")
            except RuntimeError as inner:
                raise MlflowException("write failed") from inner
        return "ok"

    assert store.retry(flaky, first_wait_s=0.001) == "ok"
    assert len(calls) == 3

    def broken():
        calls.append(1)
        raise ValueError("no such table")

    calls.clear()
    with pytest.raises(ValueError):
        store.retry(broken, first_wait_s=0.001)
    assert len(calls) == 1


def test_experiment_is_created_once_with_artifacts_beside_the_database(db_uri, tmp_path: Path):
    uri = db_uri
    c = store.client(uri)
    first = store.experiment_id(c, "bert_large", uri)
    assert store.experiment_id(c, "bert_large", uri) == first
    exp = c.get_experiment(first)
    assert exp.artifact_location == (tmp_path / "mlruns" / "bert_large").as_uri()
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"


def test_an_experiment_made_elsewhere_gets_the_model_training_kind(db_uri):
    from mlflow import MlflowClient

    made = MlflowClient(db_uri).create_experiment("by_hand")
    assert "mlflow.experimentKind" not in MlflowClient(db_uri).get_experiment(made).tags
    assert store.experiment_id(store.client(db_uri), "by_hand", db_uri) == made
    assert MlflowClient(db_uri).get_experiment(made).tags["mlflow.experimentKind"] == "custom_model_development"


def test_a_process_opens_a_store_and_looks_an_experiment_up_once(db_uri, monkeypatch):
    c = store.client(db_uri)
    assert store.client(db_uri) is c
    assert store.find_experiment(c, "late", db_uri) is None  # not there yet: not remembered as missing
    first = store.experiment_id(c, "late", db_uri)
    monkeypatch.setattr(c, "get_experiment_by_name", lambda name: pytest.fail("looked up again"))
    assert store.experiment_id(c, "late", db_uri) == first == store.find_experiment(c, "late", db_uri)


def test_a_sqlite_store_commits_through_its_write_ahead_log(db_uri: str, tmp_path: Path, monkeypatch):
    # A run makes about ten commits: in WAL mode with synchronous=NORMAL none waits for the disk.
    import sqlite3

    monkeypatch.setattr(store, "_clients", {})
    c = store.client(db_uri)
    engine = c._tracking_client.store.engine
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
    c.create_experiment("wal")
    with sqlite3.connect(tmp_path / "mlflow.db") as other:  # kept in the file: every reader sees the same mode
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert other.execute("SELECT count(*) FROM experiments WHERE name = 'wal'").fetchone()[0] == 1
