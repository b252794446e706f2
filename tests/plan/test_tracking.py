"""The plan in MLflow: a FINISHED parent run with the search's settings, figures and files and the top candidates
as child runs; a parent that ends FAILED, never RUNNING, when nothing fits, the input is refused or the search
raises."""
from __future__ import annotations

import json

import pytest
from mlflow import MlflowClient

from ipuexp.commands.plan import EXIT_CONFIG_ERROR, EXIT_INFEASIBLE, main


def _runs(uri: str, experiment: str):
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name(experiment)
    runs = c.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("ipuexp.kind") == "plan"]
    children = [r for r in runs if r.data.tags.get("ipuexp.kind") == "plan_candidate"]
    return c, parents, children


def _plan(tmp_path, db_uri, *args):
    return main(["-q", "+recipe=bert_base", f"tracking.uri={db_uri}", f"plan.out_dir={tmp_path / 'plan'}", *args])


def test_parent_run_with_the_top_candidates_as_children(tmp_path, db_uri):
    assert _plan(tmp_path, db_uri, "plan.trials=60", "plan.top_k=3") == 0
    c, parents, children = _runs(db_uri, "bert_base")
    assert len(parents) == 1
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert parent.data.params["plan.trials"] == "60" and parent.data.params["plan.top_k"] == "3"
    assert parent.data.params["system"] == "pod16" and parent.data.params["search.method"] == "optuna"
    m = parent.data.metrics
    assert m["candidates"] >= 60 and m["global_batch"] == 65536
    assert m["best_throughput_samples_per_s"] >= m["recipe_throughput_samples_per_s"] > 0
    assert {a.path for a in c.list_artifacts(parent.info.run_id)} == {"plan.json", "pareto.png"}
    top = json.loads((tmp_path / "plan" / "plan.json").read_text())["top"]
    assert len(children) == len(top) == 3
    by_rank = sorted(children, key=lambda r: int(r.data.tags["rank"]))
    for child, row in zip(by_rank, top):
        assert child.info.status == "FINISHED"
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert child.data.metrics["throughput_samples_per_s"] == pytest.approx(row["samples_per_s"], abs=0.05)
        assert child.data.metrics["peak_tile_memory_bytes"] == row["peak_tile_bytes"]
        assert child.data.metrics["fits"] == 1.0
        # Every searched option is a parameter, so the candidates compare column by column.
        assert child.data.params["options.replication_factor"].isdigit()
        assert "options.pipeline.layers_per_ipu" in child.data.params
        for change in row["changes"]:
            key, value = change.split("=", 1)
            assert child.data.params[key] == value
    assert by_rank[0].data.metrics["throughput_samples_per_s"] == pytest.approx(
        m["best_throughput_samples_per_s"])


def test_nothing_fits_ends_the_parent_failed(tmp_path, db_uri, capsys):
    # A tile may use 1% of its memory: no candidate fits.
    assert _plan(tmp_path, db_uri, "plan.trials=30", "plan.headroom=0.99") == EXIT_INFEASIBLE
    _, parents, children = _runs(db_uri, "bert_base")
    assert [p.info.status for p in parents] == ["FAILED"] and children == []
    reason = parents[0].data.tags["ipuexp.failure"]
    assert reason.startswith("no configuration of bert base fits on pod16") and "short by" in reason
    assert parents[0].data.metrics["recipe_fits"] == 0.0
    assert capsys.readouterr().err.strip().endswith(reason)


def test_refused_input_after_the_run_opened_ends_it_failed(tmp_path, db_uri, capsys):
    # No micro-batch x replicas x gradient accumulation makes a global batch of 3 on 16 IPUs.
    assert _plan(tmp_path, db_uri, "plan.global_batch=3") == EXIT_CONFIG_ERROR
    _, parents, _ = _runs(db_uri, "bert_base")
    assert [p.info.status for p in parents] == ["FAILED"]
    assert "plan.global_batch=3" in parents[0].data.tags["ipuexp.failure"]
    assert "plan.global_batch=3" in capsys.readouterr().err


def test_an_error_in_the_search_ends_the_parent_failed(tmp_path, db_uri, monkeypatch):
    import ipuexp.plan.planner as planner

    def broken(*args, **kwargs):
        raise RuntimeError("engine exploded")

    monkeypatch.setattr(planner, "plan", broken)
    with pytest.raises(RuntimeError, match="engine exploded"):
        _plan(tmp_path, db_uri)
    _, parents, _ = _runs(db_uri, "bert_base")
    assert [p.info.status for p in parents] == ["FAILED"]
    assert parents[0].data.tags["ipuexp.failure"] == "RuntimeError: engine exploded"


def test_an_out_dir_that_cannot_be_written_is_one_line_before_the_search(tmp_path, monkeypatch, capsys):
    (tmp_path / "a_file").write_text("")
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "a_file" / "plan"
    assert main(["+recipe=bert_base", "tracking.enabled=false", f"plan.out_dir={target}"]) == EXIT_CONFIG_ERROR
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"ipuexp.plan: config error: plan.out_dir='{target}' is invalid") and "\n" not in err
    assert "not a folder" in err and sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]
