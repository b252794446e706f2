import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

import pytest
from mlflow import MlflowClient

from ipuexp.tracking import JobTracking, SweepContext, track_job
from ipuexp.tracking.sweep import close_parent, open_parent, run_name, swept_keys

JOB = Path(__file__).with_name("sweep_job.py")
SWEEP = ["options.gradient_accumulation=1,4", "options.io.num_io_tiles=0,32"]


def test_run_names_say_the_swept_values():
    overrides = ["+recipe=bert_large", "options.gradient_accumulation=256", "options.io.num_io_tiles=32",
                 "tracking.experiment=x"]
    assert swept_keys(["+recipe=bert_large", *SWEEP]) == ["options.gradient_accumulation", "options.io.num_io_tiles"]
    assert run_name(overrides, ["options.gradient_accumulation", "options.io.num_io_tiles"]) == \
        "gradient_accumulation=256,num_io_tiles=32"
    assert run_name(overrides, ["options.io.num_io_tiles"]) == "num_io_tiles=32"
    assert run_name(overrides) == "gradient_accumulation=256,num_io_tiles=32"  # swept keys unknown: all but plumbing
    assert run_name(["a.size=1", "b.size=2"]) == "a.size=1,b.size=2"  # ambiguous short names stay long
    assert run_name(["+recipe=bert_large"], fallback="bert_large") == "bert_large"


def _multirun(tmp_path: Path, empty_store: Path, *args: str, sweep: Sequence[str] = SWEEP) -> MlflowClient:
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    proc = subprocess.run([sys.executable, str(JOB), "-m", *args, *sweep, "tracking.experiment=sweep",
                           f"hydra.sweep.dir={tmp_path}/multirun/s1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")


def _sweep_runs(c: MlflowClient):
    exp = c.get_experiment_by_name("sweep")
    runs = c.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    return parents, [r for r in runs if "mlflow.parentRunId" in r.data.tags]


@pytest.mark.slow
def test_multirun_is_one_parent_run_with_a_child_per_job_in_the_launch_dir_store(tmp_path: Path, empty_store):
    c = _multirun(tmp_path, empty_store)
    (parent,), children = _sweep_runs(c)
    assert parent.info.run_name == "sweep " + " ".join(SWEEP)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["sweep_dir"] == str(tmp_path / "multirun" / "s1")
    assert sorted(r.info.run_name for r in children) == [
        "gradient_accumulation=1,num_io_tiles=0", "gradient_accumulation=1,num_io_tiles=32",
        "gradient_accumulation=4,num_io_tiles=0", "gradient_accumulation=4,num_io_tiles=32"]
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parent.info.run_id}
    assert all(r.info.status == "FINISHED" for r in children)
    assert len({r.data.tags["config_hash"] for r in children}) == 4
    for r in children:
        ga = int(r.data.params["options.gradient_accumulation"])
        assert r.data.metrics["throughput_samples_per_s"] == 100.0 * ga
        assert r.info.artifact_uri.startswith((tmp_path / "mlruns").as_uri())
    # Hydra ran each job in its own folder; the store stayed where the sweep was launched
    assert not list((tmp_path / "multirun").rglob("mlflow.db"))


PRESET = """# @package _global_
hydra:
  sweeper:
    params:
      options.gradient_accumulation: 1,4
"""


@pytest.mark.slow
def test_a_preset_sweeps_children_are_named_after_the_values_that_vary(tmp_path: Path, empty_store):
    """A preset's swept keys come from its ``hydra.sweeper.params``, not the command line (``+sweep=NAME``)."""
    (tmp_path / "conf" / "sweep").mkdir(parents=True)
    (tmp_path / "conf" / "sweep" / "tiny.yaml").write_text(PRESET)
    c = _multirun(tmp_path, empty_store, "--config-dir", str(tmp_path / "conf"), "+recipe=bert_large",
                  "+sweep=tiny", sweep=["options.io.num_io_tiles=0,32"])
    (parent,), children = _sweep_runs(c)
    assert sorted(r.info.run_name for r in children) == [
        "gradient_accumulation=1,num_io_tiles=0", "gradient_accumulation=1,num_io_tiles=32",
        "gradient_accumulation=4,num_io_tiles=0", "gradient_accumulation=4,num_io_tiles=32"]
    assert parent.info.run_name == "sweep options.gradient_accumulation=1,4 options.io.num_io_tiles=0,32"
    for r in children:  # the swept keys are parameters, with the values of the job's own overrides
        assert r.info.run_name == (f"gradient_accumulation={r.data.params['options.gradient_accumulation']},"
                                   f"num_io_tiles={r.data.params['options.io.num_io_tiles']}")
        assert r.data.params["model"] == "bert_large"
    assert parent.info.status == "FINISHED" and all(r.info.status == "FINISHED" for r in children)


@pytest.mark.slow
def test_multirun_with_the_hydra_callback(tmp_path: Path, empty_store):
    c = _multirun(tmp_path, empty_store,
                  "+hydra.callbacks.mlflow._target_=ipuexp.tracking.hydra_callback.SweepTracking")
    (parent,), children = _sweep_runs(c)
    assert len(children) == 4 and {r.data.tags["mlflow.parentRunId"] for r in children} == {parent.info.run_id}
    assert parent.info.status == "FINISHED"


def _driver_config(db_uri: str, sweep_dir: Path, overrides, sweeper_params=None):
    from omegaconf import open_dict

    from ipuexp.config.compose import compose_config as compose

    config = compose([f"tracking.uri={db_uri}", "tracking.experiment=test"], return_hydra_config=True)
    with open_dict(config):
        config.hydra.sweep.dir = str(sweep_dir)
        config.hydra.overrides.task = overrides
        config.hydra.sweeper.params = sweeper_params
    return config


def test_callback_opens_the_parent_in_the_driver_and_ends_stale_children(db_uri, tmp_path: Path, caplog,
                                                                         monkeypatch):
    from ipuexp.tracking.hydra_callback import SweepTracking

    # A terminal wide enough for the store's address (pytest's temporary path) to stay on one line.
    monkeypatch.setenv("COLUMNS", "300")

    config = _driver_config(db_uri, tmp_path / "s2", ["options.gradient_accumulation=1,2"])
    SweepTracking().on_multirun_start(config)
    c = MlflowClient(db_uri)
    exp = c.get_experiment_by_name("test").experiment_id
    (parent,) = c.search_runs([exp])
    assert parent.info.status == "RUNNING"
    assert parent.info.run_name == "sweep options.gradient_accumulation=1,2"
    assert parent.data.tags["sweep_driver"] == "true"
    child = c.create_run(exp, tags={"mlflow.parentRunId": parent.info.run_id}).info.run_id  # job died silently
    with caplog.at_level("INFO", logger="ipuexp"):
        SweepTracking().on_multirun_end(config)
    assert c.get_run(child).info.status == "KILLED"
    assert c.get_run(parent.info.run_id).info.status == "KILLED"
    assert "sweep_driver" not in c.get_run(parent.info.run_id).data.tags  # a later run without a driver closes it
    # where to look: the sweep's runs side by side, in the model-training views of a local `mlflow ui`
    assert f'#/compare-runs?runs=%5B%22{child}%22%5D&experiments=%5B%22{exp}%22%5D&workflowType=machine_learning' \
        in caplog.text
    flat = " ".join(caplog.text.split())  # the words wrap to the terminal, the addresses stay whole
    assert f"mlflow ui --backend-store-uri {db_uri}" in flat
    assert "tracking.ui_url=http://127.0.0.1:P" in flat  # how to point the links at another port


def test_links_follow_the_ui_address_and_the_sweep_lock_is_removed(db_uri, tmp_path: Path, caplog):
    from omegaconf import open_dict

    from ipuexp.tracking.hydra_callback import SweepTracking
    from ipuexp.tracking.sweep import LOCK_NAME

    config = _driver_config(db_uri, tmp_path / "s3", ["options.gradient_accumulation=1,2"])
    with open_dict(config):
        config.tracking.ui_url = "http://127.0.0.1:5077/"
    SweepTracking().on_multirun_start(config)
    (tmp_path / "s3").mkdir(parents=True, exist_ok=True)
    (tmp_path / "s3" / LOCK_NAME).write_text("")  # what the jobs' parent lookup leaves
    with caplog.at_level("INFO", logger="ipuexp"):
        SweepTracking().on_multirun_end(config)
    assert "http://127.0.0.1:5077/#/experiments/" in caplog.text and "127.0.0.1:5000" not in caplog.text
    assert not (tmp_path / "s3" / LOCK_NAME).exists()


def test_a_driver_that_exits_early_leaves_no_run_running(db_uri, tmp_path: Path):
    from ipuexp.tracking import safety
    from ipuexp.tracking.hydra_callback import SweepTracking

    config = _driver_config(db_uri, tmp_path / "s3", ["+recipe=bert_large"],
                            {"options.gradient_accumulation": "1,2"})  # a preset's sweep
    SweepTracking().on_multirun_start(config)
    c = MlflowClient(db_uri)
    exp = c.get_experiment_by_name("test").experiment_id
    (parent,) = c.search_runs([exp])
    assert parent.info.run_name == "sweep options.gradient_accumulation=1,2"
    child = c.create_run(exp, tags={"mlflow.parentRunId": parent.info.run_id}).info.run_id
    safety.close_all()  # what the driver's atexit net does when Ctrl-C skips on_multirun_end
    assert c.get_run(child).info.status == "KILLED"
    assert c.get_run(parent.info.run_id).info.status == "KILLED"


def test_parent_is_running_while_a_child_runs_and_failed_if_one_failed(make_cfg, make_result, db_uri,
                                                                       tmp_path: Path):
    c = MlflowClient(db_uri)
    sweep = SweepContext(dir=tmp_path / "sweep", job_overrides=["options.gradient_accumulation=1"],
                         swept_keys=["options.gradient_accumulation"])
    (tmp_path / "sweep").mkdir()
    with track_job(JobTracking.of(make_cfg(), sweep=sweep)) as first:
        parent_id = c.get_run(first.run_id).data.tags["mlflow.parentRunId"]
        assert c.get_run(parent_id).info.status == "RUNNING"
        with pytest.raises(RuntimeError):
            with track_job(JobTracking.of(make_cfg("options.gradient_accumulation=2"), sweep=sweep)) as second:
                assert c.get_run(second.run_id).data.tags["mlflow.parentRunId"] == parent_id
                raise RuntimeError("boom")
        assert c.get_run(parent_id).info.status == "RUNNING"  # the first job is still going
        first.log_result(make_result())
    assert c.get_run(parent_id).info.status == "FAILED"
    assert c.get_run(first.run_id).info.run_name == "gradient_accumulation=1"


def test_children_left_running_are_killed_when_the_sweep_is_over(make_cfg, db_uri, tmp_path: Path):
    from ipuexp.tracking.store import client, experiment_id

    c = client(db_uri)
    exp = experiment_id(c, "test", db_uri)
    sweep = SweepContext(dir=tmp_path / "sweep")
    (tmp_path / "sweep").mkdir()
    parent = open_parent(c, exp, sweep, {})
    orphan = c.create_run(exp, tags={"mlflow.parentRunId": parent}).info.run_id  # its process was SIGKILLed
    close_parent(c, exp, parent, sweep)
    assert c.get_run(parent).info.status == "RUNNING"
    close_parent(c, exp, parent, sweep, orphans_to="KILLED")
    assert c.get_run(orphan).info.status == "KILLED"
    assert c.get_run(parent).info.status == "KILLED"


def _multirun_config(db_uri: str, sweep_dir: Path, *task: str):
    from omegaconf import open_dict

    from ipuexp.config.compose import compose_config

    config = compose_config([f"tracking.uri={db_uri}", "tracking.experiment=test"], return_hydra_config=True)
    with open_dict(config):
        config.hydra.mode = "MULTIRUN"
        config.hydra.sweep.dir = str(sweep_dir)
        config.hydra.overrides.task = list(task)
    return config


def test_a_sweep_that_lost_its_cluster_is_failed_and_the_same_command_resumes_it(
        make_cfg, make_result, db_uri, tmp_path: Path, hydra_restore_singletons):
    from hydra.core.hydra_config import HydraConfig

    from ipuexp.runner.loss import ClusterLoss
    from ipuexp.tracking.hydra_callback import SweepTracking
    from ipuexp.tracking.resume import command_key
    from ipuexp.tracking.sweep import LOST_TAG, RESUMES_TAG, find_parent

    swept = "options.gradient_accumulation=1,2,4"
    first = _multirun_config(db_uri, tmp_path / "s1", swept, "runner.ray.address=head-a:6379")
    SweepTracking().on_multirun_start(first)
    c = MlflowClient(db_uri)
    exp = c.get_experiment_by_name("test").experiment_id
    s1 = SweepContext(dir=(tmp_path / "s1").resolve(), swept_keys=["options.gradient_accumulation"])
    for ga in (1, 2):
        with track_job(JobTracking.of(make_cfg(f"options.gradient_accumulation={ga}"), sweep=s1)) as run:
            run.log_result(make_result())
    parent = find_parent(c, [exp], s1.key).info.run_id
    cut = c.create_run(exp, tags={"mlflow.parentRunId": parent}).info.run_id  # its worker died with the node

    loss = ClusterLoss("Ray cluster at head-a:6379", "the raylet on head-a died", total=3, finished=2)
    SweepTracking().on_multirun_end(first, cluster_lost=loss)
    assert c.get_run(cut).info.status == "FAILED"
    assert c.get_run(cut).data.tags["error"] == "Ray cluster at head-a:6379 was lost mid-sweep (the raylet on " \
                                              "head-a died)"
    lost = c.get_run(parent)
    assert lost.info.status == "FAILED" and lost.data.tags[LOST_TAG] == "true"
    assert loss.message == ("ipuexp: Ray cluster at head-a:6379 was lost mid-sweep (the raylet on head-a died): 2 of "
                            "3 points finished, 1 did not; re-run the same command to run only the points that did "
                            "not finish")
    close_parent(c, exp, parent, s1)  # a job that outlived the loss ends: the sweep stays FAILED
    assert c.get_run(parent).info.status == "FAILED"

    # The same command on the cluster restarted elsewhere: where it runs is not what it computes.
    second = _multirun_config(db_uri, tmp_path / "s2", swept, "runner.ray.address=head-b:6379")
    assert command_key(second) == command_key(first)
    SweepTracking().on_multirun_start(second)
    resumed = find_parent(c, [exp], SweepContext(dir=(tmp_path / "s2").resolve()).key)
    assert resumed.data.tags[RESUMES_TAG] == parent
    HydraConfig.instance().set_config(second)  # as in a job of the second sweep
    assert JobTracking.of(make_cfg("options.gradient_accumulation=1")).skip
    assert JobTracking.of(make_cfg("options.gradient_accumulation=2")).skip
    assert not JobTracking.of(make_cfg("options.gradient_accumulation=4")).skip  # it was cut short
    SweepTracking().on_multirun_end(second)
    assert c.get_run(resumed.info.run_id).info.status == "FINISHED"

    # Once the command has completed, running it again runs everything again; another command never resumes.
    third = _multirun_config(db_uri, tmp_path / "s3", swept)
    SweepTracking().on_multirun_start(third)
    assert RESUMES_TAG not in find_parent(c, [exp], SweepContext(dir=(tmp_path / "s3").resolve()).key).data.tags
    assert command_key(_multirun_config(db_uri, tmp_path / "s4", "options.gradient_accumulation=1,2")) != \
        command_key(first)


def test_a_lost_sweep_re_run_in_its_own_folder_resumes_itself(make_cfg, make_result, db_uri, tmp_path: Path,
                                                              hydra_restore_singletons):
    from hydra.core.hydra_config import HydraConfig

    from ipuexp.runner.loss import ClusterLoss
    from ipuexp.tracking.hydra_callback import SweepTracking
    from ipuexp.tracking.sweep import LOST_TAG, RESUMES_TAG, find_parent

    config = _multirun_config(db_uri, tmp_path / "s", "options.gradient_accumulation=1,2")
    SweepTracking().on_multirun_start(config)
    sweep = SweepContext(dir=(tmp_path / "s").resolve())
    with track_job(JobTracking.of(make_cfg("options.gradient_accumulation=1"), sweep=sweep)) as run:
        run.log_result(make_result())
    SweepTracking().on_multirun_end(config, cluster_lost=ClusterLoss("the sweep's local Ray", "x", 2, 1))
    c = MlflowClient(db_uri)
    exp = c.get_experiment_by_name("test").experiment_id
    SweepTracking().on_multirun_start(config)  # hydra.sweep.dir given on the command line: the same parent run
    parent = find_parent(c, [exp], sweep.key)
    assert parent.info.status == "RUNNING" and parent.data.tags[RESUMES_TAG] == parent.info.run_id
    assert LOST_TAG not in parent.data.tags and "error" not in parent.data.tags
    HydraConfig.instance().set_config(config)
    assert JobTracking.of(make_cfg("options.gradient_accumulation=1")).skip
    assert not JobTracking.of(make_cfg("options.gradient_accumulation=2")).skip
