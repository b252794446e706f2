"""The sweep's Ray driver runs in a process of its own; this module holds both ends of it.

Ray's core library ends a driver process outright when the node under it goes away (its raylet and object store
gone: exit status 1 and a log line, whatever Python was doing), so the launcher keeps the Ray driver out of the
process that runs Hydra. There a lost cluster is an ordinary failure: the launcher still holds every result that
came back, and says what was lost (``ipuexp.runner.sweep``).

The two talk over a socket pair in cloudpickled tuples. Launcher to driver: ``connect``, then per batch ``sweep``,
``job``... and ``end``; ``cancel`` or ``stop``. Driver to launcher: ``ready`` or ``error``, ``started``, a
``result`` per job, ``log`` records, and ``lost`` when the cluster goes away (the driver then exits). One driver
serves every batch a process launches with the same Ray settings, so a local Ray is started once; it stops with
the launcher's process, on Ctrl-C and with the cluster.
"""
from __future__ import annotations

import atexit
import logging
import os
import pickle
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple


class DriverLost(Exception):
    """The driver reported its cluster lost, or ended without a word; ``str()`` says what is known."""


class Driver:
    """The launcher's handle on a driver process."""

    def __init__(self, settings: Any, log_path: Optional[str]):
        ours, theirs = socket.socketpair()
        import ipuexp

        # The folder this ipuexp package is imported from (site-packages, or a checkout), first on the child's path.
        root = str(Path(ipuexp.__file__).resolve().parent.parent)
        code = (f"import sys; sys.path.insert(0, {root!r}); from ipuexp.runner.driver import main; "
                f"main({theirs.fileno()})")
        out = open(log_path, "ab") if log_path else None
        try:
            # Its own session: Ctrl-C reaches the launcher only, which cancels the jobs through the driver.
            self.process = subprocess.Popen([sys.executable, "-c", code], pass_fds=[theirs.fileno()],
                                            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
        finally:
            theirs.close()
            if out is not None:
                out.close()
        self.conn = Connection(ours.detach())
        self.settings, self.log_path = settings, log_path
        self.info: Dict[str, Any] = {}
        self.ending = False
        """Set once the driver was told to stop or has reported a loss: its end says nothing new."""
        from ipuexp.runner.cluster import ClusterError

        try:
            main_file = getattr(sys.modules.get("__main__"), "__file__", None)
            self.send("connect", settings, sys.path, sys.argv, main_file)
            kind, *rest = self.receive(None) or ("error", "no answer")
        except DriverLost as exc:
            self.close()
            raise ClusterError(f"the sweep's Ray driver ended while joining Ray ({exc})") from None
        except BaseException:  # Ctrl-C while Ray starts: the driver stops it once it is up
            self.close(cancel=True)
            raise
        if kind == "error":
            self.close()
            raise ClusterError(rest[0])
        self.info = rest[0]

    @property
    def where(self) -> str:
        return str(self.info.get("where", "Ray"))

    @property
    def label(self) -> str:
        return str(self.info.get("label", "Ray cluster"))

    def alive(self) -> bool:
        return self.process.poll() is None and not self.conn.closed

    def start_batch(self, sweep_id: str, context: bytes, options: Any, preload: List[str]) -> int:
        """Begin a batch with the sweep's pickled context; return how many jobs run at once."""
        self.send("sweep", sweep_id, context, options, preload)
        msg = self.receive(None)
        assert msg is not None and msg[0] == "started", msg
        return int(msg[1])

    def send(self, *msg: Any) -> None:
        from ray import cloudpickle

        try:
            self.conn.send_bytes(cloudpickle.dumps(msg))
        except OSError:
            raise DriverLost("stopped" if self.ending else self._death()) from None

    def receive(self, timeout_s: Optional[float]) -> Optional[Tuple[Any, ...]]:
        """The next message but log records (logged here); None when none came within ``timeout_s``."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                if not self.conn.poll(wait):
                    return None
                msg = pickle.loads(self.conn.recv_bytes())
            except (EOFError, OSError):
                raise DriverLost("stopped" if self.ending else self._death()) from None
            if msg[0] == "log":
                logging.getLogger(msg[1]).log(msg[2], msg[3])
            elif msg[0] == "lost":  # the driver exits after saying so
                self.ending = True
                raise DriverLost(msg[1])
            else:
                return msg

    def close(self, cancel: bool = False, timeout_s: float = 30.0) -> None:
        """Stop the driver (and the local Ray it started), cancelling running jobs with ``cancel``."""
        if not self.conn.closed:
            try:
                if not self.ending:
                    self.send("cancel" if cancel else "stop")
                    self.ending = True
                deadline = time.monotonic() + timeout_s
                while self.receive(max(0.0, deadline - time.monotonic())) is not None:
                    pass  # results of jobs that finished meanwhile: the batch is over
            except DriverLost:  # the driver has ended: what it says now is not needed
                pass
            self.conn.close()
        try:
            self.process.wait(timeout=timeout_s if self.process.poll() is None else 0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _death(self) -> str:
        """What is known of a driver that ended without reporting: its raylet or GCS gone, else its exit."""
        from ipuexp.runner.cluster import reachable

        try:
            code = self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            code = None
        raylet, gcs = self.info.get("raylet"), self.info.get("gcs")
        if raylet and reachable(*raylet) is False:
            return f"the raylet on {raylet[0]} died"
        if gcs and reachable(*gcs) is False:
            return f"its GCS at {gcs[0]}:{gcs[1]} stopped"
        where = f"; Ray's messages are in {self.log_path}" if self.log_path else ""
        return f"the sweep's Ray driver process ended with status {code}{where}"


_current: Optional[Driver] = None


def connect(settings: Any, log_path: Optional[str]) -> Driver:
    """The driver for ``settings``: the running one when it has the same, else a new one (the old one stopped)."""
    global _current
    settings = _with_own_ray(settings)
    if _current is not None and (not _current.alive() or _current.settings != settings):
        stop()
    if _current is None:
        if not _registered:
            _register()
        _current = Driver(settings, log_path)
    return _current


def stop(cancel: bool = False) -> None:
    """Stop the driver, if any (also after it was lost: then only its process is waited for)."""
    global _current
    driver, _current = _current, None
    if driver is not None:
        driver.close(cancel=cancel)


_registered = False


def _register() -> None:
    global _registered
    atexit.register(stop)
    _registered = True


def _with_own_ray(settings: Any) -> Any:
    """Settings whose address is this process's own Ray, when it drives one (``ray.init`` before the sweep)."""
    import dataclasses

    ray = sys.modules.get("ray")
    if settings.address or ray is None or not ray.is_initialized():
        return settings
    try:
        return dataclasses.replace(settings, address=ray.get_runtime_context().gcs_address)
    except Exception:  # Ray Client: the driver process joins through RAY_ADDRESS or not at all
        return settings


def main(fd: int) -> None:
    """The driver process: join or start Ray, run the batches it is sent, report each job as it ends."""
    from ipuexp.runner.serve import serve

    serve(Connection(fd))
    os._exit(0)  # after Ray's own shutdown (or its loss): nothing left that atexit could do
