"""The default sweeper: Hydra's basic sweeper, less its batch pre-composition (the CLI's pre-flight checks every
swept value, the ray launcher composes each job)."""
from __future__ import annotations

from ipuexp.config.compose import compose_config


def test_default_sweeper_is_the_preflight_sweeper():
    cfg = compose_config(["+recipe=bert_large"], return_hydra_config=True)
    assert cfg.hydra.sweeper._target_ == "hydra_plugins.ipuexp.sweeper.PreflightSweeper"


def test_batches_are_not_composed_before_launch():
    from hydra_plugins.ipuexp.sweeper import PreflightSweeper

    class Loader:
        calls = 0

        def load_sweep_config(self, **kwargs):
            Loader.calls += 1

    sweeper = PreflightSweeper(max_batch_size=None, params=None)
    sweeper.config_loader = Loader()
    sweeper.config = object()
    sweeper.validate_batch_is_legal([["a=1"], ["a=2"]])
    assert Loader.calls == 0


def _multirun(tmp_path, overrides, task):
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    (conf / "config.yaml").write_text("a: 0\n")
    with initialize_config_dir(config_dir=str(conf), version_base=None, job_name="test"):
        return GlobalHydra.instance().hydra.multirun(
            config_name="config", task_function=task, with_log_configuration=False,
            overrides=["hydra/sweeper=ipuexp", "hydra.mode=MULTIRUN", f"hydra.sweep.dir={tmp_path / 'sweep'}",
                       *overrides])


def test_a_failed_batch_ends_the_sweep_with_one_summary(tmp_path, capsys, hydra_restore_singletons):
    """Hydra's basic launcher, two points a batch: as Hydra's basic sweeper, the sweep stops after the batch with
    the failed point; one table of what ran, then the command ends on the failed point's one line, raised as the
    task's own exception type."""
    import pytest

    from ipuexp.runner.errors import JobFailedError

    def task(cfg):
        if cfg.a == 3:
            raise ValueError("three is bad")
        return {"a": cfg.a}

    with pytest.raises(ValueError, match="^ValueError: three is bad$") as raised:
        _multirun(tmp_path, ["hydra/launcher=basic", "hydra.sweeper.max_batch_size=2", "a=0,1,2,3,4,5"], task)
    assert isinstance(raised.value, JobFailedError)  # Hydra prints it as one line
    captured = capsys.readouterr()
    flat = " ".join(captured.out.split())  # lines break between words to fit the terminal
    assert captured.out.count("Sweep ") == 1
    assert "3 done, 1 failed, 0 out of memory" in flat and "#3 failed: ValueError: three is bad" in flat
    assert "Error executing job" not in captured.err
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.name.isdigit()) == ["0", "1", "2", "3"]


def test_summary_can_be_turned_off(tmp_path, capsys, hydra_restore_singletons):
    batches = _multirun(tmp_path, ["hydra/launcher=ipuexp", "hydra.launcher.summary=false", "a=0,1"], lambda c: c.a)
    assert [r.return_value for r in batches[0]] == [0, 1]
    out = capsys.readouterr().out
    assert "Sweep " not in out and "[2/2] #1 done (a=1)" in out
