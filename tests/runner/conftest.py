"""Helpers for the runner tests: run Hydra multiruns in this process through the ``ray`` launcher.

The launcher's driver process starts its own local Ray (2 CPUs, 100 MB object store) on first use; the module
fixture stops it, so no test leaves Ray running.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator, List, Sequence

import pytest
from hydra_state import _ipuexp_configs, _restore_hydra  # noqa: F401  (fixtures, found by name)

LIGHT_RAY = ["hydra/launcher=ray", "hydra.launcher.num_cpus=2", "hydra.launcher.object_store_memory=100000000"]
"""Launcher overrides for a 2-core CI machine (Ray's object store minimum is 75 MB)."""


@pytest.fixture(scope="module")
def own_ray() -> Iterator[None]:
    """No Ray before the module's tests; the launcher's driver process starts one; none left after."""
    import ray

    from ipuexp.runner import cluster, driver

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    previous = os.environ.pop("RAY_ADDRESS", None)  # a local Ray of the launcher's own, not somebody's cluster
    if ray.is_initialized():
        ray.shutdown()
    try:
        yield
    finally:
        driver.stop()
        cluster.shutdown(only_own=False)
        if previous is not None:
            os.environ["RAY_ADDRESS"] = previous
    assert not ray.is_initialized()


@pytest.fixture
def app(tmp_path: Path) -> Path:
    """A one-key Hydra app (``a: 0``) whose jobs are plain Python task functions."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "config.yaml").write_text("a: 0\n")
    return conf


@pytest.fixture
def light_ray() -> List[str]:
    return list(LIGHT_RAY)


@pytest.fixture
def multirun() -> Callable[..., List[Any]]:
    return _multirun


@pytest.fixture
def launch() -> Callable[..., List[Any]]:
    return _launch


def _multirun(config_dir: Path, overrides: Sequence[str], task_function: Callable[[Any], Any],
              config_name: str = "config") -> List[Any]:
    """``hydra.multirun`` as ``@hydra.main`` runs it (sweeper, then launcher); the JobReturns of its one batch."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    with initialize_config_dir(config_dir=str(config_dir), version_base=None, job_name="test"):
        # hydra.mode=MULTIRUN: what @hydra.main adds for -m, which jobs read to know they are sweep points
        batches = GlobalHydra.instance().hydra.multirun(config_name=config_name, task_function=task_function,
                                                        overrides=list(overrides) + ["hydra.mode=MULTIRUN"],
                                                        with_log_configuration=False)
    assert len(batches) == 1
    return list(batches[0])


def _launch(config_dir: Path, overrides: Sequence[str], jobs: Sequence[Sequence[str]],
            task_function: Callable[[Any], Any], config_name: str = "config") -> List[Any]:
    """The launcher alone, as Hydra's sweeper calls it: every JobReturn, failed ones included (the sweeper would
    raise the first failure instead of returning them)."""
    from hydra import initialize_config_dir
    from hydra._internal.callbacks import Callbacks
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.plugins import Plugins
    from hydra.types import HydraContext, RunMode

    with initialize_config_dir(config_dir=str(config_dir), version_base=None, job_name="test"):
        hydra_ = GlobalHydra.instance().hydra
        cfg = hydra_.compose_config(config_name, list(overrides), run_mode=RunMode.MULTIRUN,
                                    with_log_configuration=False)
        HydraConfig.instance().set_config(cfg)
        context = HydraContext(config_loader=hydra_.config_loader, callbacks=Callbacks(cfg))
        launcher = Plugins.instance().instantiate_launcher(hydra_context=context, task_function=task_function,
                                                           config=cfg)
        return list(launcher.launch([list(j) for j in jobs], initial_job_idx=0))
