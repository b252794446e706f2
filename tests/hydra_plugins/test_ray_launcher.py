"""The ``ray`` launcher against Hydra's own launcher conformance suites (shipped with hydra-core).

The in-process suite runs the launcher in this process on the module's Ray; the integration suite runs Hydra apps
as subprocesses that join the same Ray through ``RAY_ADDRESS``, so the whole module starts Ray once.
"""
from __future__ import annotations

import pytest
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.test_utils.launcher_common_tests import IntegrationTestSuite, LauncherTestSuite
from hydra.test_utils.test_utils import TSweepRunner, chdir_plugin_root  # noqa: F401

from hydra_plugins.ipuexp.ray_launcher import RayLauncher

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_cluster")]


def test_discovery() -> None:
    """Hydra finds the launcher among its plugins (``hydra_plugins`` namespace package)."""
    names = [p.__name__ for p in Plugins.instance().discover(Launcher)]
    assert RayLauncher.__name__ in names


def test_registered_config() -> None:
    from hydra.core.config_store import ConfigStore

    import hydra_plugins.ipuexp.config  # noqa: F401  (registers hydra/launcher: ray)

    node = ConfigStore.instance().load("hydra/launcher/ray.yaml").node
    assert node._target_ == "hydra_plugins.ipuexp.ray_launcher.RayLauncher"
    assert node.max_retries >= 0 and node.log_to_driver is False


@pytest.mark.parametrize("launcher_name, overrides", [("ray", ["hydra.launcher.summary=false"])])
class TestRayLauncher(LauncherTestSuite):
    pass


@pytest.mark.parametrize(
    "task_launcher_cfg, extra_flags",
    [({}, ["-m", "hydra/job_logging=disabled", "hydra/launcher=ray", "hydra.launcher.summary=false"])],
)
class TestRayLauncherIntegration(IntegrationTestSuite):
    pass


def test_settings_follow_runner_config() -> None:
    """``hydra.launcher`` takes its Ray settings from the experiment's ``runner.ray`` block."""
    from ipuexp.config.compose import compose_config

    overrides = ["hydra/launcher=ray", "runner.ray.address=ray://head:10001", "runner.ray.num_cpus=3"]
    cfg = compose_config(overrides, return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert (launcher.address, launcher.num_cpus, launcher.object_store_memory) == ("ray://head:10001", 3, 200_000_000)


def test_join_cluster_by_address(ray_cluster: str, tmp_path, monkeypatch) -> None:
    """``address`` joins a running cluster (here the module's Ray) instead of starting one."""
    import subprocess
    import sys

    (tmp_path / "app.py").write_text(
        "import hydra\n\n@hydra.main(version_base=None, config_path=None, config_name=None)\n"
        "def main(cfg):\n    return cfg.a\n\nif __name__ == '__main__':\n    main()\n")
    monkeypatch.delenv("RAY_ADDRESS")
    out = subprocess.run([sys.executable, "app.py", "-m", "hydra/launcher=ray", f"hydra.launcher.address={ray_cluster}",
                          "+a=1,2,3"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "on Ray cluster (1 node, 2 CPUs)" in out.stdout and "3 done, 0 failed" in out.stdout
