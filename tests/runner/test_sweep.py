"""A real ipuexp multirun through the ``ray`` launcher on a local Ray of 2 CPUs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra.core.utils import JobStatus

from ipuexp.app import run_job
from ipuexp.result import Result
from ipuexp.runner.errors import JobFailedError

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("own_ray")]


@pytest.fixture(scope="module")
def conf_dir() -> Path:
    from ipuexp.config.store import CONF_DIR

    return CONF_DIR


def test_ipuexp_sweep(conf_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, light_ray, multirun) -> None:
    sweep = tmp_path / "sweep"
    db = tmp_path / "mlflow.db"
    overrides = light_ray + [
        "+recipe=bert_base", "options.gradient_accumulation=64,128", "options.io.num_io_tiles=0,32",
        f"engine.cache_dir={tmp_path / 'cache'}", f"tracking.uri=sqlite:///{db}", "tracking.experiment=sweep_test",
        f"hydra.sweep.dir={sweep}",
    ]
    rets = multirun(conf_dir, overrides, run_job)  # importable: workers load it by reference

    assert len(rets) == 4
    points = set()
    for i, ret in enumerate(rets):
        assert ret.status == JobStatus.COMPLETED, ret._return_value
        result = ret.return_value
        assert isinstance(result, Result) and result.recipe == "bert_base"
        job_dir = sweep / str(i)
        assert Path(ret.working_dir) == job_dir  # hydra.job.chdir: true, as with the basic launcher
        on_disk = json.loads((job_dir / "result.json").read_text())
        assert on_disk["model"]["parameters"] == result.model.parameters > 100e6
        assert ret.cfg.options.gradient_accumulation == int(ret.overrides[1].split("=")[1])
        assert (job_dir / ".hydra" / "overrides.yaml").is_file()
        points.add((ret.cfg.options.gradient_accumulation, ret.cfg.options.io.num_io_tiles))
    assert points == {(64, 0), (64, 32), (128, 0), (128, 32)}
    # The four jobs share one capture of the model (captured once for the sweep, before the jobs ran).
    assert len({r.return_value.model.capture_seconds for r in rets}) == 1
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 1

    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{db}")
    runs = client.search_runs([client.get_experiment_by_name("sweep_test").experiment_id])
    # One run per job; a sweep's parent run (if the tracking keeps one) logs no job configuration.
    jobs = [r for r in runs if "options.gradient_accumulation" in r.data.params]
    assert len(jobs) == 4 and {r.info.status for r in jobs} == {"FINISHED"}

    out = " ".join(capsys.readouterr().out.split())  # lines break between words to fit the terminal
    assert "4 done, 0 failed, 0 out of memory" in out


def test_config_error_in_sweep(conf_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, light_ray,
                               multirun) -> None:
    """A point the validator rejects fails with its one-line message; the other points run."""
    overrides = light_ray + ["+recipe=bert_base", "options.io.num_io_tiles=0,31", "tracking.enabled=false",
                             f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    with pytest.raises(JobFailedError, match=r"^options\.io\.num_io_tiles=31 is invalid: allowed: 0, or an even"):
        multirun(conf_dir, overrides, run_job)
    out = " ".join(capsys.readouterr().out.split())  # lines break between words to fit the terminal
    assert "1 done, 1 failed, 0 out of memory" in out
    assert "#1 failed: options.io.num_io_tiles=31 is invalid" in out
    assert (tmp_path / "sweep" / "0" / "result.json").is_file()
