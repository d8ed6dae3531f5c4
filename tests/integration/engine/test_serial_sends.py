"""SQLite's send path (storage/sqlite/sends.py) on a real broker database: a commit's direct
SENDs go in numbered, all of them, or none when one of them cannot."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sbroker
from sbroker.core.messages import new_id
from sbroker.storage.ports import Direct
from sbroker.storage.sqlite.connection import SqliteConnection
from sbroker.storage.sqlite.sends import SerialSends


def _database(path: Path) -> list[tuple[int, str, int, int]]:
    """Two conversing dialogs: (sender rowid, sender handle, peer rowid, peer queue) each."""
    with sbroker.Broker.open(path) as b:
        b.create_queue("I")
        b.create_queue("T")
        b.create_service("Init", "I")
        b.create_service("Target", "T", ["DEFAULT"])
        with b.transaction() as tx:
            for h in [tx.begin_dialog("Init", "Target") for _ in range(2)]:
                tx.send(h, "DEFAULT", b"first")
        with b.transaction() as tx:
            tx.receive("T", top=2)
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT s.conv_order, s.handle, p.conv_order, p.queue_id FROM sb_endpoints s"
            " JOIN sb_endpoints p ON p.conversation_id = s.conversation_id"
            " AND p.is_initiator = 0 WHERE s.is_initiator = 1 ORDER BY s.conv_order").fetchall()


def _direct(dialog: tuple[int, str, int, int], body: bytes) -> Direct:
    sender, handle, peer, queue = dialog
    return Direct(sender, handle, peer, queue, "DEFAULT", "NONE", body, new_id())


def _send(path: Path, sends: list[Direct]) -> tuple[bool, list[tuple[object, ...]]]:
    conn = sqlite3.connect(path, factory=SqliteConnection, isolation_level=None)
    try:
        version = conn.execute(conn.sql.catalog_version).fetchone()[0]
        conn.execute("BEGIN IMMEDIATE")
        went = SerialSends().send(conn, sends, 1.0, version, True)
        conn.execute("COMMIT")
        rows = conn.execute("SELECT conv_order, msn, body FROM sb_messages WHERE msn > 0"
                            " ORDER BY queuing_order").fetchall()
        return bool(went), rows
    finally:
        conn.close()


def test_many_sends_go_in_numbered_per_conversation(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    one, two = _database(path)
    went, rows = _send(path, [_direct(one, b"a"), _direct(two, b"b"), _direct(one, b"c")])
    assert went
    assert rows == [(one[2], 1, b"a"), (two[2], 1, b"b"), (one[2], 2, b"c")]
    went, rows = _send(path, [_direct(two, b"d")])
    assert went and rows[-1] == (two[2], 2, b"d")


def test_when_one_cannot_go_none_stays_and_no_number_is_used(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    one, two = _database(path)
    stale = (two[0], "not-its-handle", two[2], two[3])  # as if its rowid had been reused
    went, rows = _send(path, [_direct(one, b"a"), _direct(one, b"b"), _direct(stale, b"x")])
    assert not went and rows == []
    went, rows = _send(path, [_direct(one, b"c")])
    assert went and rows == [(one[2], 1, b"c")]
