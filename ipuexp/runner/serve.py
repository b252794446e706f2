"""The loop of the sweep's Ray driver process (the other end is ``ipuexp.runner.driver.Driver``)."""
from __future__ import annotations

import logging
import pickle
import sys
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any, Optional, Tuple

from ipuexp.runner.dispatch import ClusterGone, Dispatch, Job
from ipuexp.runner.errors import describe

PROBE_EVERY_S = 1.0
"""How often the driver checks that its raylet still listens while jobs run (Ray itself notices a dead node
through its health checks, tens of seconds later)."""


class _LauncherGone(Exception):
    """The launcher's end of the connection closed: its process ended."""


def serve(conn: Connection) -> None:
    """Join or start Ray as the launcher asks, run its batches, and report; return when told to stop, when the
    launcher is gone, or once the cluster is lost."""
    _forward_logs(conn)
    try:
        loop = _start(conn)
        if loop is None:
            return
    except _LauncherGone:
        return
    ray = loop.ray
    try:
        loop.run()
    except _LauncherGone:
        loop.halt(cancel=True)
    except ClusterGone as exc:  # no shutdown: Ray cannot leave a node that is gone; a local Ray's processes
        _report_loss(conn, loop.diagnose() or str(exc))  # end with this one
    except (ray.exceptions.RayError, ConnectionError) as exc:  # a Ray call failed: the cluster is not there
        _report_loss(conn, loop.diagnose() or describe(exc))
    except Exception as exc:
        traceback.print_exc()
        _report_loss(conn, f"the sweep's Ray driver failed: {describe(exc)}")


def _start(conn: Connection) -> Optional["_Loop"]:
    """Join or start Ray; None when that failed (the launcher has been told why)."""
    _, settings, path, argv, main_file = _recv(conn)
    # As the launcher's process: Ray gives the workers the folder of the driver's script (its __main__ file, when
    # on its path) and its working directory.
    sys.path[:], sys.argv[:] = path, argv
    if main_file:
        sys.modules["__main__"].__file__ = main_file
    import ray

    from ipuexp.runner import cluster

    try:
        where = cluster.connect(settings)
    except Exception as exc:  # ClusterError, or Ray failing to start
        _send(conn, "error", str(exc) if isinstance(exc, cluster.ClusterError) else describe(exc))
        return None
    raylet = cluster.local_raylet()
    _send(conn, "ready", dict(where=where, label=cluster.label(settings), raylet=raylet, gcs=_gcs_address(ray)))
    return _Loop(conn, ray, raylet)


class _Loop:
    def __init__(self, conn: Connection, ray: Any, raylet: Optional[Tuple[str, int]]):
        self.conn, self.ray, self.raylet = conn, ray, raylet
        self.batch: Optional[Dispatch] = None
        self.more = False  # the launcher may still send jobs of this batch
        self.next_probe = 0.0

    def run(self) -> None:
        while True:
            busy = self.batch is not None and self.batch.pending > 0
            if _poll(self.conn, 0 if busy else 1.0):
                if not self.handle(_recv(self.conn)):
                    return
                continue  # every job that is waiting is submitted before results are collected
            if busy:
                assert self.batch is not None
                # Short waits while the launcher is still composing jobs, so each starts as soon as it comes.
                for job, payload in self.batch.collect(0.05 if self.more else 0.5):
                    _send(self.conn, "result", job.pos, payload)
                self.probe()

    def handle(self, msg: Tuple[Any, ...]) -> bool:
        kind, *args = msg
        if kind == "sweep":
            sweep_id, context, options, preload = args
            self.batch = Dispatch(self.ray, sweep_id, context, options, preload)
            self.more = True
            _send(self.conn, "started", self.batch.slots)
        elif kind == "job":
            assert self.batch is not None
            self.batch.add(Job(*args))
        elif kind == "end":
            self.more = False
        else:  # cancel or stop
            self.halt(cancel=kind == "cancel")
            return False
        return True

    def probe(self) -> None:
        """Raise ClusterGone when the raylet under this driver stopped listening."""
        now = time.monotonic()
        if now >= self.next_probe:
            self.next_probe = now + PROBE_EVERY_S
            reason = self.diagnose()
            if reason:
                raise ClusterGone(reason)

    def diagnose(self) -> Optional[str]:
        from ipuexp.runner.cluster import reachable

        if self.raylet and reachable(*self.raylet) is False:
            return f"the raylet on {self.raylet[0]} died"
        return None

    def halt(self, cancel: bool) -> None:
        from ipuexp.runner import cluster

        if cancel and self.batch is not None:
            self.batch.cancel()
        cluster.shutdown()


def _gcs_address(ray: Any) -> Optional[Tuple[str, int]]:
    try:
        host, _, port = ray.get_runtime_context().gcs_address.rpartition(":")
        return host, int(port)
    except Exception:  # Ray Client
        return None


def _report_loss(conn: Connection, reason: str) -> None:
    try:
        _send(conn, "lost", reason)
    except _LauncherGone:
        pass


def _send(conn: Connection, *msg: Any) -> None:
    from ray import cloudpickle

    try:
        conn.send_bytes(cloudpickle.dumps(msg))
    except OSError:
        raise _LauncherGone() from None


def _recv(conn: Connection) -> Tuple[Any, ...]:
    try:
        return pickle.loads(conn.recv_bytes())
    except (EOFError, OSError):
        raise _LauncherGone() from None


def _poll(conn: Connection, timeout_s: float) -> bool:
    try:
        return conn.poll(timeout_s)
    except (EOFError, OSError):
        raise _LauncherGone() from None


class _Forward(logging.Handler):
    """Sends ipuexp's log records to the launcher, which logs them where Hydra configured logging."""

    def __init__(self, conn: Connection):
        super().__init__(logging.INFO)
        self.conn = conn

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _send(self.conn, "log", record.name, record.levelno, record.getMessage())
        except Exception:  # the launcher is gone; nobody to tell
            pass


def _forward_logs(conn: Connection) -> None:
    logger = logging.getLogger("ipuexp")
    logger.setLevel(logging.INFO)
    logger.addHandler(_Forward(conn))
    logger.propagate = False
