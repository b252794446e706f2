"""One small local Ray for the launcher tests: started here, shut down at the end of each module."""
from __future__ import annotations

import os
from typing import Iterator

import pytest

# A light Ray on a 2-core CI machine: 2 CPUs, 100 MB object store (Ray's minimum is 75 MB), no usage report.
RAY_CPUS = 2
OBJECT_STORE = 100_000_000


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """A local Ray in this process; ``RAY_ADDRESS`` points subprocess drivers (Hydra apps under test) at it."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        ray.shutdown()
    ctx = ray.init(address="local", num_cpus=RAY_CPUS, num_gpus=0, object_store_memory=OBJECT_STORE,
                   include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    address = ctx.address_info["gcs_address"]
    previous = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = address
    try:
        yield address
    finally:
        from ipuexp.runner import driver

        driver.stop()  # the launcher's driver process joined this Ray
        if previous is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = previous
        ray.shutdown()


@pytest.fixture(autouse=True)
def hydra_compat_version_base() -> Iterator[None]:
    """Hydra's launcher suites expect the version base of an app that names none (``hydra.job.chdir`` then
    defaults to true); a test elsewhere in the same process may have set 1.3 through Hydra's compose API."""
    from hydra.core.singleton import Singleton
    from hydra.version import VersionBase

    saved = Singleton._instances.pop(VersionBase, None)
    yield
    Singleton._instances.pop(VersionBase, None)
    if saved is not None:
        Singleton._instances[VersionBase] = saved
