"""Checkpoints run in the checkpointer's thread, not inside the COMMIT of a broker transaction,
and what they copy reaches the database file."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import sbroker
from sbroker.storage.sqlite.checkpoint import SAFETY_PAGES, Checkpointer
from sbroker.storage.sqlite.writer import Writer


def _send(broker: sbroker.Broker, n: int) -> None:
    with broker.transaction() as tx:
        handle = tx.begin_dialog("InitService", "TargetService")
    for i in range(n):
        with broker.transaction() as tx:
            tx.send(handle, body=f"m{i}")


def test_connections_leave_checkpoints_to_the_checkpointer(pair: sbroker.Broker) -> None:
    with pair.db.connection() as conn:
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == SAFETY_PAGES


def test_committed_messages_reach_the_database_file_without_an_inline_checkpoint(
        pair: sbroker.Broker, db_path: Path, tmp_path: Path) -> None:
    _send(pair, 50)
    assert pair.db.checkpointer.wait_checkpointed(timeout=30)
    busy, frames, copied = pair.db.checkpointer.last or (1, 0, -1)
    assert (busy, copied) == (0, frames)
    # The database file alone (no WAL beside it) now holds all 50 messages.
    copy = tmp_path / "copy.db"
    shutil.copyfile(db_path, copy)
    conn = sqlite3.connect(copy)
    try:
        bodies = {row[0] for row in conn.execute("SELECT body FROM sb_messages")}
    finally:
        conn.close()
    assert bodies == {f"m{i}".encode() for i in range(50)}


def test_every_writer_commit_is_reported_and_a_lazy_batch_is_not(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    commits: list[int] = []

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        return conn

    setup = connect()
    setup.execute("CREATE TABLE t (x INTEGER)")
    setup.close()
    writer = Writer(connect, "NORMAL", on_commit=lambda: commits.append(1))
    try:
        writer.run(lambda c: c.execute("INSERT INTO t VALUES (1)"))
        writer.run(lambda c: c.execute("INSERT INTO t VALUES (2)"))
        assert len(commits) == 2
        writer.run(lambda c: None, lazy=True)  # no lazy lock taken: commits as usual
        assert len(commits) == 3
    finally:
        writer.close()


def test_the_thread_ends_when_idle_and_on_close(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.execute("INSERT INTO t VALUES (1)")

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    idle = Checkpointer(connect, min_interval=0.0, idle_exit=0.01)
    idle.committed()
    assert idle.wait_checkpointed(timeout=30)
    thread = idle._worker
    if thread is not None:
        thread.join(30)
    assert idle._worker is None and idle.runs == 1
    idle.committed()  # starts again on the next commit
    assert idle.wait_checkpointed(timeout=30) and idle.runs == 2
    idle.close()
    assert not [t for t in threading.enumerate()
                if t.name == "sbroker-checkpointer" and t is thread]

    closing = Checkpointer(connect, min_interval=0.0, idle_exit=60.0)
    closing.committed()
    assert closing.wait_checkpointed(timeout=30)
    running = closing._worker
    closing.close()
    assert running is not None and not running.is_alive()
    closing.committed()  # after close: nothing starts
    assert closing._worker is None
    conn.close()
