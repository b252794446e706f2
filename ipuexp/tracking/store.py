"""Where runs go: the tracking URI, the experiment, and a client that survives a busy SQLite file.

A process opens one client per store and looks an experiment up once: opening a store checks (and on a new file
creates) its schema, which must not be paid again by every job a worker process runs.

MLflow's own default store is ``sqlite:///mlflow.db`` with artifacts under ``./mlruns``, both relative to the
working directory. Hydra moves a job into its run directory, so relative local locations are resolved against
the directory the user launched from instead; otherwise every job would get a database of its own.
"""
from __future__ import annotations

import contextlib
import fcntl
import atexit
import hashlib
import os
import random
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Optional, Tuple, TypeVar

from ipuexp.models.spec import model_label

if TYPE_CHECKING:
    from ipuexp.config.types import AnyConfig

T = TypeVar("T")

DEFAULT_URI = "sqlite:///mlflow.db"
"""MLflow 3's default tracking URI (``mlflow.store.tracking.DEFAULT_TRACKING_URI``)."""
ARTIFACTS_DIR = "mlruns"
"""MLflow's default local artifact root (``DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH``)."""
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
"""The experiment's kind as MLflow's UI names a model-training experiment (what its own kind selector stores).
MLflow 3 UIs whose sidebar carries the GenAI / Model training switch decide the view from that switch instead; see
:mod:`ipuexp.tracking.links`."""

busy_retries = 0
"""How many calls this process repeated after lock contention (reported by the concurrency checks)."""
_clients: Dict[str, Any] = {}
_experiments: Dict[Tuple[str, str], str] = {}
_SCHEME_ONLY = ("databricks", "databricks-uc", "uc")
_BUSY = ("database is locked", "database is busy", "database table is locked")


def launch_dir() -> Path:
    """The directory the user started from (Hydra's original cwd inside a Hydra job)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            from hydra.utils import get_original_cwd

            return Path(get_original_cwd())
    except ImportError:
        pass
    return Path.cwd()


def tracking_uri(cfg: Optional[AnyConfig]) -> str:
    """``tracking.uri``, else ``MLFLOW_TRACKING_URI``, else MLflow's default; local paths made absolute."""
    uri = (cfg.tracking.uri if cfg is not None else None) or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI
    return absolute_uri(str(uri), launch_dir())


def absolute_uri(uri: str, base: Path) -> str:
    """Anchor a relative ``sqlite:///file`` or plain/``file:`` path at ``base``; other URIs pass unchanged."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        rel = uri[len("sqlite:///"):]
        if rel and rel != ":memory:":
            return "sqlite:///" + str((base / rel).resolve())
        return uri
    if uri.startswith("file:") and not uri.startswith("file:/"):
        return (base / uri[len("file:"):]).resolve().as_uri()
    if ":" not in uri:  # a bare path (MLflow's file store); "databricks" and other scheme-only URIs excluded
        return uri if uri in _SCHEME_ONLY else (base / uri).resolve().as_uri()
    return uri


def sqlite_path(uri: str) -> Optional[Path]:
    """The database file of an absolute ``sqlite:////path`` URI, else None."""
    if uri.startswith("sqlite:////"):
        return Path(uri[len("sqlite:///"):].split("?", 1)[0])
    return None


def quoted(value: str) -> str:
    """``value`` as a string literal of MLflow's search filter, which has quotes but no escapes: in single quotes,
    or in double quotes when it holds a single quote; a value holding both cannot be searched for (ValueError)."""
    text = str(value)
    if "'" not in text:
        return f"'{text}'"
    if '"' not in text:
        return f'"{text}"'
    raise ValueError(f"{text!r} holds both quote characters, which an MLflow search filter cannot express")


def experiment_name(cfg: AnyConfig) -> str:
    """``tracking.experiment``, else the recipe name, else the model name."""
    return str(cfg.tracking.experiment or cfg.recipe or model_label(cfg.model))


def is_busy(exc: BaseException) -> bool:
    """True for SQLite's lock contention errors, wherever in the exception chain MLflow wrapped them."""
    while exc is not None:
        if any(b in str(exc).lower() for b in _BUSY):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def retry(fn: Callable[..., T], *args: Any, attempts: int = 12, first_wait_s: float = 0.05, **kwargs: Any) -> T:
    """Call ``fn``; on SQLite lock contention wait (exponential backoff with jitter) and call again.

    A locked write rolls back its whole transaction, so repeating it cannot duplicate anything. SQLite's own
    busy timeout does not cover a deferred transaction that finds the lock taken when it upgrades to a write
    (it fails at once), which is what many processes writing one file run into.
    """
    global busy_retries
    wait = first_wait_s
    for attempt in range(attempts):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # MlflowException and SQLAlchemy's OperationalError both land here
            if attempt == attempts - 1 or not is_busy(exc):
                raise
            busy_retries += 1
            time.sleep(wait * (1.0 + random.random()))
            wait = min(wait * 2.0, 5.0)
    raise AssertionError("unreachable")


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (created if missing), held for the ``with`` block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def client(uri: str) -> Any:
    """This process's MlflowClient for ``uri``; the first one initialises the store (schema) under a file lock."""
    if uri not in _clients:
        if not _clients:
            atexit.register(close_stores)
        _clients[uri] = _open_client(uri)
    return _clients[uri]


def close_stores() -> None:
    """Close this process's connections to its stores as it exits (at exit, or before ``os._exit``). SQLite removes ``mlflow.db-wal`` and
    ``mlflow.db-shm`` when the last connection to a database closes, after copying the log into it; connections
    left open by an exiting process leave both files behind."""
    for uri, c in list(_clients.items()):
        engine = getattr(getattr(getattr(c, "_tracking_client", None), "store", None), "engine", None)
        try:
            if engine is not None:
                engine.dispose()
        except Exception:  # at exit: a store that cannot be closed is left to SQLite's next opener
            pass


def has_clients() -> bool:
    """Whether this process has opened a store (its connections must not be shared with a forked process)."""
    return bool(_clients)


def _open_client(uri: str) -> Any:
    import logging

    from mlflow import MlflowClient

    # MLflow logs two INFO lines as it creates a new store's tables ("Creating initial MLflow database tables...",
    # "Updating database tables"): nothing a user acts on. Set after importing mlflow, whose logging setup resets
    # the levels of its loggers.
    for name in ("mlflow.store.db.utils", "alembic.runtime.migration"):
        logging.getLogger(name).setLevel(logging.WARNING)

    db = sqlite_path(uri)
    if db is None:
        return MlflowClient(tracking_uri=uri)
    # The client opens its store at once, and MLflow creates the schema when it first opens an empty database;
    # two processes doing that together break each other's migrations. The lock file lives in the temp dir
    # (SQLite files must be on a local disk anyway) to keep the user's folder clean.
    digest = hashlib.sha256(str(db).encode()).hexdigest()[:16]
    with file_lock(Path(tempfile.gettempdir()) / f"ipuexp-mlflow-{digest}.lock"):
        checkpoint(uri, "TRUNCATE")  # the runs a killed command left only in the log
        c = retry(MlflowClient, tracking_uri=uri)
        _commit_without_fsync(c)
        return c


def _commit_without_fsync(c: Any) -> None:
    """The SQLite store in write-ahead-log mode with ``synchronous=NORMAL`` (SQLite's own advice for WAL,
    https://www.sqlite.org/wal.html, "Performance considerations"): a commit appends to the log instead of waiting for
    the disk twice, so the ten or so commits MLflow makes for a run cost microseconds instead of milliseconds each,
    and readers (``mlflow ui``, other jobs) no longer block writers. A process that dies loses nothing committed; a
    power cut may lose the last commits, never the database. The journal mode is kept in the file; the
    synchronous setting is each connection's, set as the store's engine opens it."""
    from sqlalchemy import event

    engine = getattr(getattr(getattr(c, "_tracking_client", None), "store", None), "engine", None)
    if engine is None or engine.dialect.name != "sqlite":
        return

    def pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    event.listen(engine, "connect", pragmas)
    engine.dispose()  # connections opened while the schema was checked reopen with the pragmas


def checkpoint(uri: str, mode: str = "PASSIVE") -> None:
    """Copy what the write-ahead log holds into the SQLite file of ``uri`` (``mlflow.db``), so that the file alone
    is the whole store whenever no command runs: a copy of it, or a reader that ignores ``mlflow.db-wal``, sees
    every run. ``PASSIVE`` as a run ends (it waits for no one); ``TRUNCATE`` as a command opens the store, which
    also empties a log a killed command left. Best effort: a busy store is checkpointed by its next writer."""
    import sqlite3

    db = sqlite_path(uri)
    if db is None or not db.is_file():
        return
    try:
        # Never a long wait: a busy store is checkpointed by whoever ends or opens it next.
        con = sqlite3.connect(str(db), timeout=0.25 if mode == "TRUNCATE" else 0.1)
        try:
            con.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        pass


def find_experiment(c: Any, name: str, uri: str) -> Optional[str]:
    """The id of the active experiment ``name``, or None; looked up once per process and store."""
    key = (uri, name)
    if key not in _experiments:
        exp = retry(c.get_experiment_by_name, name)
        if exp is None or exp.lifecycle_stage == "deleted":
            return None
        _experiments[key] = exp.experiment_id
    return _experiments[key]


def experiment_id(c: Any, name: str, uri: str) -> str:
    """Find or create the experiment ``name``; safe when many jobs try at once, done once per process."""
    key = (uri, name)
    if key not in _experiments:
        _experiments[key] = _find_or_create(c, name, uri)
    return _experiments[key]


def _find_or_create(c: Any, name: str, uri: str) -> str:
    from mlflow.exceptions import MlflowException

    exp = retry(c.get_experiment_by_name, name)
    if exp is not None:
        if exp.lifecycle_stage == "deleted":
            retry(c.restore_experiment, exp.experiment_id)
        for key, value in EXPERIMENT_KIND.items():
            if key not in exp.tags:  # made before ipuexp set the kind, or by hand
                retry(c.set_experiment_tag, exp.experiment_id, key, value)
        return exp.experiment_id
    db = sqlite_path(uri)
    location = None
    if db is not None:
        # MLflow would put artifacts under the job's cwd; keep them beside the database instead.
        slug = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
        location = (db.parent / ARTIFACTS_DIR / slug).as_uri()
    try:
        return retry(c.create_experiment, name, artifact_location=location, tags=EXPERIMENT_KIND)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        return retry(c.get_experiment_by_name, name).experiment_id
