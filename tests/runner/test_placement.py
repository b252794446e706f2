"""Where the ``ipuexp`` launcher runs a sweep: small analytic sweeps here, the rest and anything given Ray by name
on Ray."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ipuexp.config.errors import ConfigError
from ipuexp.runner import placement
from ipuexp.runner.cluster import RaySettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_ray_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


def test_small_analytic_sweeps_run_here(no_ray_address: None) -> None:
    below = placement.IN_PROCESS_BELOW
    why = placement.in_process(RaySettings(), None, below, 9)
    assert why == (f"9 points, fewer than hydra.launcher.in_process_below={below}: a local Ray's start-up costs more "
                   "than running them side by side saves")
    assert placement.in_process(RaySettings(), None, below, below) is None  # as large as the threshold: Ray
    assert placement.in_process(RaySettings(), None, 0, 1) is None  # the ray launcher's 0: always Ray
    assert placement.in_process(RaySettings(), None, below, 9, functional=True) is None  # jobs that train: Ray


def test_ray_by_name_always_means_ray(no_ray_address: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster address (runner.ray.address, RAY_ADDRESS) or a runtime environment for the jobs is Ray, whatever
    the sweep's size."""
    assert placement.in_process(RaySettings(address="ray://head:10001"), None, 200, 2) is None
    assert placement.in_process(RaySettings(address="auto"), None, 200, 2) is None
    assert placement.in_process(RaySettings(), {"env_vars": {"A": "1"}}, 200, 2) is None
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert placement.in_process(RaySettings(), None, 200, 2) is None


def test_functional_sweeps_are_told_by_their_engine() -> None:
    from ipuexp.config.compose import compose_config

    mnist = compose_config(["+recipe=mnist_pipeline"], return_hydra_config=True)
    bert = compose_config(["+recipe=bert_base"], return_hydra_config=True)
    assert placement.functional(mnist, [["a=1"]])
    assert not placement.functional(bert, [["options.gradient_accumulation=64"]])
    assert placement.functional(bert, [["engine.mode=analytic"], ["engine.mode=functional"]])
    assert bert.hydra.launcher.in_process_below == placement.IN_PROCESS_BELOW  # the default launcher's
    assert compose_config(["hydra/launcher=ray"], return_hydra_config=True).hydra.launcher.in_process_below == 0


@pytest.mark.parametrize("value", [-1, 2.5, "10", True])
def test_threshold_must_be_a_count(value: object) -> None:
    refused = r"^hydra\.launcher\.in_process_below=.* is invalid: allowed: an integer >= 0"
    with pytest.raises(ConfigError, match=refused):
        placement.check(value)


def test_bad_threshold_on_the_command_line_is_one_line(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "ipuexp", "-m", "+recipe=bert_base", "options.io.num_io_tiles=0,32",
                           "hydra.launcher.in_process_below=-5"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("ipuexp: config error: hydra.launcher.in_process_below=-5 is invalid: allowed: an "
                                   "integer >= 0 (sweeps with fewer points run in this process; 0: every sweep on Ray)")
    assert not (tmp_path / "multirun").exists()
