"""The tracking store's pre-flight probe: a store that cannot be opened or does not answer is one line within
``tracking.timeout_s``; a store that is there, new or busy, passes."""
from __future__ import annotations

import socket
import sqlite3
import threading
import time

import pytest

from ipuexp.config.errors import ConfigError
from ipuexp.tracking.probe import StoreUnreachable, check_store, reachable


def test_a_store_that_is_there_passes(db_uri, tmp_path):
    reachable(db_uri)
    reachable(f"sqlite:///{tmp_path / 'new' / 'mlflow.db'}")  # a new file in a folder that can be made
    assert not (tmp_path / "new").exists()  # probing creates nothing


def test_a_busy_store_passes(db_uri):
    path = db_uri[len("sqlite:///"):]
    holder = sqlite3.connect(path)
    holder.execute("BEGIN EXCLUSIVE")  # another process in the middle of a write
    try:
        reachable(db_uri, timeout_s=0.2)
    finally:
        holder.rollback()
        holder.close()


@pytest.mark.parametrize("content,why", [(b"definitely not sqlite", "not an SQLite database"),
                                         (b"SQLite format 3\x00" + b"\xff" * 200, "cannot be opened")])
def test_a_file_that_is_not_a_database_is_refused(tmp_path, content, why):
    (tmp_path / "x.db").write_bytes(content)
    with pytest.raises(StoreUnreachable, match=why):
        reachable(f"sqlite:///{tmp_path / 'x.db'}")


def test_another_programs_sqlite_file_is_refused_without_a_byte_written(tmp_path):
    """An Optuna study's database: MLflow would write its tables into it, and the job would fail after its work."""
    import hashlib

    db = tmp_path / "study.db"
    con = sqlite3.connect(db)
    con.executescript("CREATE TABLE studies (study_id INTEGER PRIMARY KEY); CREATE TABLE trials (trial_id INTEGER);"
                      "CREATE TABLE alembic_version (version_num TEXT); PRAGMA journal_mode=WAL;")
    con.close()
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
    with pytest.raises(ConfigError) as err:
        check_store("tracking.uri", "sqlite:///study.db", f"sqlite:///{db}")
    assert str(err.value) == (f"tracking.uri='sqlite:///study.db' is invalid: allowed: a tracking store that opens "
                              f"within 10 s (tracking.timeout_s): {db} is another program's SQLite database (tables "
                              "alembic_version, studies, trials; no MLflow runs and experiments); name a new file "
                              "or an MLflow store")
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()} == before
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()  # an empty database: MLflow makes its tables in it
    reachable(f"sqlite:///{empty}")


def test_a_missing_store_is_refused_where_it_must_exist(tmp_path):
    with pytest.raises(StoreUnreachable, match="no such file"):
        reachable(f"sqlite:///{tmp_path / 'none.db'}", must_exist=True)
    with pytest.raises(StoreUnreachable, match="no such folder"):
        reachable((tmp_path / "mlruns").as_uri(), must_exist=True)


def test_a_server_that_does_not_answer_is_refused_within_the_timeout():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    held = []
    threading.Thread(target=lambda: held.append(server.accept()), daemon=True).start()
    port = server.getsockname()[1]
    try:
        start = time.monotonic()
        with pytest.raises(ConfigError) as err:
            check_store("tracking.uri", f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}", timeout_s=1.0)
        assert time.monotonic() - start < 30
    finally:
        server.close()
    text = str(err.value)
    assert text.startswith(f"tracking.uri='http://127.0.0.1:{port}' is invalid") and "did not answer within 1 s" in text


def test_a_server_that_refuses_the_connection_is_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(StoreUnreachable, match="cannot be reached"):
        reachable(f"http://127.0.0.1:{port}", timeout_s=2)
