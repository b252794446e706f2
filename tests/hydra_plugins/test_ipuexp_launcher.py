"""The default ``ipuexp`` launcher against Hydra's own launcher conformance suites, on its in-process path (the
suites' sweeps are small and give no Ray address); ``test_ray_launcher`` runs the same suites on Ray."""
from __future__ import annotations

from typing import Iterator

import pytest
from hydra.test_utils.launcher_common_tests import IntegrationTestSuite, LauncherTestSuite
from hydra.test_utils.test_utils import TSweepRunner, chdir_plugin_root  # noqa: F401


@pytest.fixture(autouse=True)
def no_ray_address(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No cluster named, so the small sweeps run in this process (subprocess apps inherit this)."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    yield
    ray = __import__("sys").modules.get("ray")
    assert ray is None or not ray.is_initialized()


def test_registered_config() -> None:
    from hydra.core.config_store import ConfigStore

    import hydra_plugins.ipuexp.config  # noqa: F401  (registers hydra/launcher: ipuexp)
    from ipuexp.runner.placement import IN_PROCESS_BELOW

    node = ConfigStore.instance().load("hydra/launcher/ipuexp.yaml").node
    assert node._target_ == "hydra_plugins.ipuexp.ray_launcher.RayLauncher"
    assert node.in_process_below == IN_PROCESS_BELOW
    assert ConfigStore.instance().load("hydra/launcher/ray.yaml").node.in_process_below == 0


@pytest.mark.parametrize("launcher_name, overrides", [("ipuexp", ["hydra.launcher.summary=false"])])
class TestInProcessLauncher(LauncherTestSuite):
    pass


@pytest.mark.parametrize(
    "task_launcher_cfg, extra_flags",
    [({}, ["-m", "hydra/job_logging=disabled", "hydra/launcher=ipuexp", "hydra.launcher.summary=false"])],
)
class TestInProcessLauncherIntegration(IntegrationTestSuite):
    pass
