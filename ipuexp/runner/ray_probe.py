"""Ray's settings checked before a sweep starts: ``RAY_AUTH_MODE`` (Ray reads any other value as "disabled",
silently), and the cluster's address answering within ``runner.ray.connect_timeout_s`` (Ray itself retries a dead
address for minutes, saying nothing, with a driver process that outlives a killed command)."""
from __future__ import annotations

import os
import socket
from typing import Optional, Tuple

from ipuexp.config.types import ConfigNode

AUTH_MODES = ("disabled", "token")
"""The values of ``RAY_AUTH_MODE`` Ray knows (case aside)."""


def check_ray(cfg: ConfigNode) -> None:
    """Raise ConfigError for a ``RAY_AUTH_MODE`` Ray does not know or a Ray address that does not answer."""
    from ipuexp.config.errors import ConfigError

    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is not None and mode.strip().lower() not in AUTH_MODES:
        raise ConfigError("RAY_AUTH_MODE", mode, f"allowed: {' or '.join(AUTH_MODES)} (Ray's token authentication; "
                          "unset: Ray's default)")
    if "in_process_below" not in cfg.hydra.launcher:
        return  # not ipuexp's launcher: it does not join Ray
    key, address = _address(cfg)
    if not address:
        return
    timeout = float(cfg.runner.ray.get("connect_timeout_s", 10.0))
    where = _host_port(address)
    if where is None:
        return  # 'auto', 'local': Ray finds the cluster on this machine, or says at once that there is none
    reason = _unanswered(*where, timeout)
    if reason:
        raise ConfigError(key, address, f"allowed: the address of a running Ray cluster ('auto', 'host:port' of "
                          f"its head, 'ray://host:10001'): {reason} (runner.ray.connect_timeout_s={timeout:g})")


def _address(cfg: ConfigNode) -> Tuple[str, Optional[str]]:
    """The key that names the sweep's Ray address, and the address (None: a local Ray)."""
    launcher = cfg.hydra.launcher
    try:
        own = launcher.get("address")
    except Exception:  # an interpolation a composed configuration alone cannot resolve
        own = None
    if own:
        ray_node = cfg.get("runner", {}).get("ray", {})
        return ("runner.ray.address" if ray_node.get("address") == own else "hydra.launcher.address"), str(own)
    return "RAY_ADDRESS", os.environ.get("RAY_ADDRESS") or None


def _host_port(address: str) -> Optional[Tuple[str, int]]:
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rstrip("/").rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]") or "127.0.0.1", int(port)


def _unanswered(host: str, port: int, timeout_s: float) -> Optional[str]:
    """Why nothing answers at ``host:port`` within ``timeout_s``, or None when something does."""
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except socket.timeout:
        return f"{host}:{port} did not answer within {timeout_s:g} s"
    except OSError as err:
        return f"{host}:{port} cannot be reached ({err.strerror or err})"
    return None
