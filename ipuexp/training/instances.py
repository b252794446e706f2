"""The instances of a functional run (PopRun style): in this process, or one Ray actor each.

With ``options.num_instances`` > 1 every instance is a Ray actor owning replication_factor / num_instances
replicas and its shard of the data; the actors form a gloo process group (torch.distributed, rendezvous on a
free localhost TCP port), start from instance 0's weights and all-reduce their gradients every weight update
(the IPU-POD scaling talk, "PopRun and PopDist": PopDist broadcasts the initial weights and shares the dataset
between the instances; the TF distributed-training guide, section 9).
"""
from __future__ import annotations

import socket
from typing import Any, List, Optional

from ipuexp.config.schema import ExperimentConfig
from ipuexp.training.worker import InstanceWorker, default_threads


def free_port() -> int:
    """A TCP port free on localhost now (the gloo rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalInstances:
    """One instance, run in this process."""

    def __init__(self, exp: ExperimentConfig, base_dir: Optional[str] = None) -> None:
        self.workers = [InstanceWorker(exp, 0, base_dir)]
        self.info = self.workers[0].setup()

    def map(self, method: str, *args: Any) -> List[Any]:
        return [getattr(w, method)(*args) for w in self.workers]

    def close(self) -> None:
        for w in self.workers:
            w.close()


class RayInstances:
    """``num_instances`` Ray actors forming one gloo group, on the Ray this process is a driver of (the runner
    connects it: ``ipuexp.runner.cluster.session``)."""

    def __init__(self, exp: ExperimentConfig, base_dir: Optional[str] = None) -> None:
        import ray

        assert ray.is_initialized(), "multi-instance runs need a Ray driver: ipuexp.runner.cluster.session"
        n = int(exp.options.num_instances)
        address = f"tcp://127.0.0.1:{free_port()}"
        # The actors claim no CPU of Ray's so that a run started inside a Ray task cannot wait for itself;
        # each sets its torch thread count to its share of the cores instead.
        actor = ray.remote(num_cpus=0)(InstanceWorker)
        self._ray = ray
        self.actors = [actor.remote(exp, i, base_dir, address, default_threads(n)) for i in range(n)]
        try:
            self.info = ray.get([a.setup.remote() for a in self.actors])[0]
        except BaseException:
            self.close()
            raise

    def map(self, method: str, *args: Any) -> List[Any]:
        return self._ray.get([getattr(a, method).remote(*args) for a in self.actors])

    def close(self) -> None:
        try:
            self._ray.get([a.close.remote() for a in self.actors], timeout=60)
        except Exception:  # an actor that died or hangs in a collective is killed below all the same
            pass
        finally:
            for a in self.actors:
                self._ray.kill(a)


def start_instances(exp: ExperimentConfig, base_dir: Optional[str] = None) -> Any:
    """The instances of ``exp``: in-process for one, Ray actors for more."""
    if int(exp.options.num_instances) > 1:
        return RayInstances(exp, base_dir)
    return LocalInstances(exp, base_dir)
