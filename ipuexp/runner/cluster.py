"""Start a small local Ray, or join a running cluster, for the sweep launcher.

A local Ray is sized for a workstation: CPUs from the machine unless given, a small object store (the only objects
are job configurations, results and captured graphs), no dashboard, no usage reporting. A cluster is joined with
``address``: ``auto`` (the cluster ``ray start --head`` made on this machine), ``host:6379`` (its GCS) or
``ray://host:10001`` (Ray Client, for a cluster this machine is not part of).
"""
from __future__ import annotations

import contextlib
import logging
import os
import socket
from dataclasses import dataclass
from typing import Any, Dict, Iterator, Optional, Tuple

from hydra.errors import CompactHydraException

log = logging.getLogger(__name__)

QUIET_ENV = {
    # No usage-stats report to anyscale.com: sweeps run on machines without network as often as not.
    "RAY_USAGE_STATS_ENABLED": "0",
}
"""Environment of a local Ray this module starts (a variable the user has set is kept)."""

CLIENT_SERVER_FAILED = ("Starting Ray client server failed", "psutil.ZombieProcess", "psutil.NoSuchProcess")
"""Ray Client's answers when the head's proxy could not start this driver's server. The proxy forks it from a
process full of gRPC threads, and the child sometimes dies at once (SIGSEGV, an empty log: 18 connections of 110 to
a head beside two CPU burners with Ray 2.60, none of 40 with ``GRPC_ENABLE_FORK_SUPPORT=0`` on the head). The proxy
then reports the failed start, or trips over the dead child (psutil's errors). A new connection gets a new server,
so the connection is tried again."""
CLIENT_ATTEMPTS = 4
"""Connections tried before such a failure ends the sweep."""


class ClusterError(CompactHydraException):
    """Ray could not be started or joined; one line naming the setting."""


@dataclass
class RaySettings:
    """How the launcher gets a Ray cluster (``hydra.launcher`` fields, defaulting to ``runner.ray``)."""

    address: Optional[str] = None
    """None: a new local Ray (or ``RAY_ADDRESS`` when set); 'auto', 'host:port' or 'ray://host:10001': join."""
    num_cpus: Optional[int] = None
    """CPUs of a local Ray; None: the machine's (cgroup limits respected, as Ray counts them)."""
    object_store_memory: Optional[int] = 200_000_000
    """Object store bytes of a local Ray."""
    log_to_driver: bool = False
    """Forward the workers' stdout/stderr to this console (each job's log is in its job folder either way)."""


_started_here = False
"""True while this process runs a local Ray it started itself."""
_connected_here = False
"""True while this process is a Ray driver because ``connect`` made it one (not the user's own ``ray.init``)."""


def connect(settings: RaySettings) -> str:
    """Make sure this process is a Ray driver; return a short description of the cluster."""
    import ray

    global _started_here, _connected_here
    if ray.is_initialized():  # the user's own ray.init(), or an earlier batch of this sweep
        return _describe(ray)
    kwargs: Dict[str, Any] = dict(log_to_driver=settings.log_to_driver, logging_level=logging.WARNING)
    address = settings.address or os.environ.get("RAY_ADDRESS") or None
    try:
        if address:
            _join(ray, address, kwargs)
        else:
            for key, value in QUIET_ENV.items():
                os.environ.setdefault(key, value)
            # "local": always a new instance, never a cluster that happens to run on this machine. Ray turns token
            # authentication on for it and says so at every start; a sweep's own local Ray needs no such notice.
            notice = logging.getLogger("ray._private.authentication.authentication_token_setup")
            level = notice.level
            notice.setLevel(logging.ERROR)
            try:
                ray.init(address="local", num_cpus=settings.num_cpus, num_gpus=0,
                         object_store_memory=settings.object_store_memory, include_dashboard=False, **kwargs)
            finally:
                notice.setLevel(level)
            _started_here = True
        _connected_here = True
    except Exception as exc:  # ConnectionError, ValueError (bad address or sizes), RuntimeError
        try:
            ray.shutdown()  # what a failed start had started (its driver's processes) ends with it
        except Exception:
            pass
        first = _first_words(str(exc))
        if address:
            hint = ("; a cluster with token authentication (ray start --head turns it on when the head has "
                    "~/.ray/auth_token) needs RAY_AUTH_MODE=token here and its token: RAY_AUTH_TOKEN=(ray "
                    "get-auth-token on the head) or the head's ~/.ray/auth_token"
                    ) if os.environ.get("RAY_AUTH_MODE", "").lower() != "token" else ""
            raise ClusterError(f"runner.ray.address={address!r}: cannot join the Ray cluster ({first}){hint}") from exc
        raise ClusterError(f"cannot start a local Ray (num_cpus={settings.num_cpus}, object_store_memory="
                           f"{settings.object_store_memory}): {first}") from exc
    return _describe(ray)


def _join(ray: Any, address: str, kwargs: Dict[str, Any]) -> None:
    """``ray.init`` at ``address``, again after a Ray Client server that failed to start on the head."""
    for attempt in range(1, CLIENT_ATTEMPTS + 1):
        try:
            ray.init(address=address, **kwargs)
            return
        except Exception as exc:
            if not any(answer in str(exc) for answer in CLIENT_SERVER_FAILED) or attempt == CLIENT_ATTEMPTS:
                raise
            with contextlib.suppress(Exception):
                ray.shutdown()
            log.warning("Ray Client's server failed on the head (try %d of %d); connecting again", attempt,
                        CLIENT_ATTEMPTS)


def _first_words(text: str) -> str:
    """An error on one line of at most 300 characters; of a traceback the head sent back, only what it raised."""
    head, sep, trace = text.partition("Traceback (most recent call last):")
    if sep and trace.strip():
        text = f"{head} {trace.strip().splitlines()[-1]}"
    return " ".join(text.split())[:300]


def shutdown(only_own: bool = True) -> None:
    """Stop the local Ray this module started, or disconnect from the cluster it joined.

    With ``only_own`` a Ray the user initialised before the sweep is left alone.
    """
    import ray

    global _started_here, _connected_here
    if ray.is_initialized() and (_connected_here or not only_own):
        ray.shutdown()
    _started_here = _connected_here = False


@contextlib.contextmanager
def session(settings: RaySettings) -> Iterator[str]:
    """A Ray driver for the block: joins or starts Ray as ``connect`` does, and leaves again only what it
    started (multi-instance functional runs; a sweep's jobs find the sweep's Ray already there)."""
    import ray

    owns = not ray.is_initialized()
    description = connect(settings)
    try:
        yield description
    finally:
        if owns:
            shutdown()


def started_here() -> bool:
    return _started_here


def label(settings: RaySettings) -> str:
    """How the line reporting a lost cluster names it: the GCS address it was joined at, or the local Ray."""
    import ray

    if _started_here:
        return "the sweep's local Ray"
    try:
        address = ray.get_runtime_context().gcs_address
    except Exception:  # Ray Client
        address = settings.address or os.environ.get("RAY_ADDRESS") or "?"
    return f"Ray cluster at {address}"


def local_raylet() -> Optional[Tuple[str, int]]:
    """Host and port of the raylet this driver is attached to; None under Ray Client, which has none."""
    import ray

    try:
        node_id = ray.get_runtime_context().get_node_id()
        node = next(n for n in ray.nodes() if n.get("NodeID") == node_id)
        return str(node["NodeManagerAddress"]), int(node["NodeManagerPort"])
    except Exception:
        return None


def reachable(host: str, port: int, timeout_s: float = 1.0) -> Optional[bool]:
    """False when nothing listens at ``host:port`` (the connection is refused), True when something does, None
    when it cannot be told (a timeout: the host may be gone, or only slow)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except ConnectionRefusedError:
        return False
    except OSError:
        return None


def _describe(ray: Any) -> str:
    try:
        cpus = ray.cluster_resources().get("CPU", 0)
        nodes = len([n for n in ray.nodes() if n.get("Alive")])
    except Exception:  # Ray Client does not expose every call on old servers
        return "Ray"
    where = "local Ray" if _started_here else "Ray cluster"
    return f"{where} ({nodes} node{'s' if nodes != 1 else ''}, {cpus:g} CPUs)"
