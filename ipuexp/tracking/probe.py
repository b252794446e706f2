"""Is the tracking store there? A probe of a few seconds before a job or a command starts, so that a database that
cannot be opened or a server that does not answer is one line (``StoreUnreachable``) instead of MLflow's minutes of
retries and a traceback; and MLflow's own HTTP requests bounded by the same time (``tracking.timeout_s``)."""
from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

from ipuexp.tracking.store import sqlite_path

DEFAULT_TIMEOUT_S = 10.0
"""``tracking.timeout_s``'s default: how long a store may take to answer the probe."""
_SQLITE_MAGIC = b"SQLite format 3\x00"
MLFLOW_TABLES = frozenset({"experiments", "runs"})
"""Tables every MLflow SQLite store has: a database with tables but not these is another program's."""


class StoreUnreachable(RuntimeError):
    """A tracking store that cannot be opened or does not answer; ``str()`` is one line saying why."""


def bound_requests(timeout_s: float) -> None:
    """MLflow's HTTP client waits up to 120 s per request and retries 7 times with backoff (minutes for a server
    that does not answer); bound it to ``timeout_s`` a request and one retry, unless the user set those variables.
    Set in the environment, so the workers a sweep starts inherit it."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(max(1, int(round(timeout_s)))))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")


def reachable(uri: str, timeout_s: float = DEFAULT_TIMEOUT_S, must_exist: bool = False) -> None:
    """Raise StoreUnreachable unless the store of ``uri`` (absolute, as ``store.tracking_uri`` gives it) can be
    opened within ``timeout_s``; a new SQLite file or file store only needs a folder that can be written, unless
    ``must_exist`` (a command that only reads runs: it must not leave a new empty store behind)."""
    bound_requests(timeout_s)
    db = sqlite_path(uri)
    parts = urlsplit(uri)
    scheme = parts.scheme.split("+", 1)[0]
    local = db if db is not None else Path(parts.path) if scheme == "file" else None
    if must_exist and local is not None and not local.exists():
        raise StoreUnreachable(f"{local}: no such {'file' if db is not None else 'folder'} (no runs recorded there)")
    if db is not None:
        _sqlite(db, timeout_s)
    elif scheme in ("http", "https"):
        _server(uri, timeout_s)
    elif scheme in ("postgresql", "mysql", "mssql") and parts.hostname:
        _answers(parts.hostname, parts.port or {"postgresql": 5432, "mysql": 3306, "mssql": 1433}[scheme], timeout_s)
    elif scheme == "file":
        _folder(Path(parts.path))


def check_store(key: str, value: object, uri: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                must_exist: bool = False) -> None:
    """:func:`reachable` as the configuration error of the key or argument that named the store (``value``, as
    given)."""
    from ipuexp.config.errors import ConfigError

    try:
        reachable(uri, timeout_s, must_exist)
    except StoreUnreachable as err:
        raise ConfigError(key, value, f"allowed: a tracking store that opens within {timeout_s:g} s "
                                      f"(tracking.timeout_s): {err}") from None


def _folder(path: Path) -> None:
    from ipuexp.data.paths import unwritable

    reason = unwritable(path)
    if reason:
        raise StoreUnreachable(reason)


def _sqlite(db: Path, timeout_s: float) -> None:
    import sqlite3

    if not db.exists():
        _folder(db.parent)
        return
    try:
        with open(db, "rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except OSError as err:
        raise StoreUnreachable(f"{db} cannot be opened ({err.strerror or err})") from None
    if head and head != _SQLITE_MAGIC:
        raise StoreUnreachable(f"{db} is not an SQLite database")
    if not os.access(db, os.W_OK) or not os.access(db.parent, os.W_OK):
        raise StoreUnreachable(f"{db} cannot be written (its permissions, or its folder's)")
    try:
        # Read only and without locks: no byte written, not even the -wal and -shm files a WAL database would get.
        con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True, timeout=timeout_s)
        try:
            tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            con.close()
    except sqlite3.Error as err:
        if any(word in str(err).lower() for word in ("locked", "busy")):
            return  # in use by other writers: the store's own retries wait for it (store.retry)
        raise StoreUnreachable(f"{db} cannot be opened as an SQLite database ({err})") from None
    if tables and not MLFLOW_TABLES <= tables:  # MLflow would add its tables to another program's database
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise StoreUnreachable(f"{db} is another program's SQLite database (tables {shown}; no MLflow runs and "
                               "experiments); name a new file or an MLflow store")


def _answers(host: str, port: int, timeout_s: float) -> None:
    """A database server: a TCP connection within ``timeout_s``."""
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except socket.timeout:
        raise StoreUnreachable(f"{host}:{port} did not answer within {timeout_s:g} s") from None
    except OSError as err:
        raise StoreUnreachable(f"{host}:{port} cannot be reached ({err.strerror or err})") from None


def _server(uri: str, timeout_s: float) -> None:
    """A tracking server: an answer of MLflow's REST API (any experiment list, or a refusal to an unauthenticated
    client) within ``timeout_s``."""
    import urllib.error
    import urllib.request

    url = uri.rstrip("/") + "/api/2.0/mlflow/experiments/search?max_results=1"
    try:
        urllib.request.urlopen(url, timeout=timeout_s).close()
    except urllib.error.HTTPError as err:
        if err.code not in (401, 403):
            raise StoreUnreachable(f"{url} answered HTTP {err.code} (not an MLflow tracking server?)") from None
    except (socket.timeout, TimeoutError):
        raise StoreUnreachable(f"{uri} did not answer within {timeout_s:g} s") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        if isinstance(reason, (socket.timeout, TimeoutError)):
            raise StoreUnreachable(f"{uri} did not answer within {timeout_s:g} s") from None
        raise StoreUnreachable(f"{uri} cannot be reached ({getattr(reason, 'strerror', None) or reason})") from None
