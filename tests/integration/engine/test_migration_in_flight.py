"""A SQLite database of schema version 14, made by that version of sbroker with work in flight
(tests/support/make_v14_in_flight.py wrote its rows), opened by this version: every message
is delivered once, in order.  Issue 40 asks this of every queue-schema migration: a later
migration runs on open here, against work its author did not make."""

from __future__ import annotations

import os
import socket
import sqlite3
from pathlib import Path

from support.helpers import on_hook

import sbroker
from sbroker import DIALOG_TIMER, FakeClock
from sbroker.engine import streams
from sbroker.storage.migrate import statements
from sbroker.storage.sqlite.connector import APPLICATION_ID, MIGRATIONS

ROWS = Path(__file__).resolve().parents[2] / "support" / "v14_in_flight.sql"
MADE_AT = 1_700_000_011.0  # the maker's FakeClock when it copied the file


def _v14_database(path: Path) -> None:
    """Migrations 1-14, then the maker's rows (in place of the ones migrations seed). Its
    process is gone: the session row is made to name a dead process of this host."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for migration in MIGRATIONS[:14]:
        for statement in statements(migration.text, sqlite3.complete_statement):
            conn.execute(statement)
    tables = [name for (name,) in conn.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name != 'sqlite_sequence'")]
    for table in tables:
        conn.execute(f'DELETE FROM "{table}"')
    for statement in statements(ROWS.read_text("utf-8"), sqlite3.complete_statement):
        conn.execute(statement)
    conn.execute("UPDATE sb_sessions SET host = ?, pid = ?, start_token = 'gone'",
                 (socket.gethostname(), os.getpid()))
    conn.execute("PRAGMA user_version = 14")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("COMMIT")
    conn.close()


def _receive(b: sbroker.Broker, queue: str) -> list[tuple[str, str]]:
    with b.transaction() as tx:
        return [(m.message_type_name, m.message_body.decode()) for m in tx.receive(queue)]


def _texts(got: list[tuple[str, str]]) -> list[str]:
    return [body if kind == "DEFAULT" else kind for kind, body in got]


def test_work_in_flight_is_delivered_once_in_order_after_migration(tmp_path: Path) -> None:
    path = tmp_path / "v14.db"
    _v14_database(path)
    clock = FakeClock(MADE_AT)
    with sbroker.Broker.open(path, clock=clock, start=True) as b:
        # RECEIVE order in a group: B (begun first) before C, whatever the queuing order.
        assert _texts(_receive(b, "InitQueue")) == ["b0", "b1", "c0", "c1"]
        assert _texts(_receive(b, "InitQueue")) == [DIALOG_TIMER, "e0"]
        assert _receive(b, "InitQueue") == []
        # D's group was locked by the dead process's open RECEIVE: reaped, then delivered.
        assert _texts(_receive(b, "TargetQueue")) == ["a0", "a1", "a2"]
        assert _texts(_receive(b, "TargetQueue")) == ["d0", "d1"]
        assert _receive(b, "TargetQueue") == []
        # F's timer, set before the migration, fires on time.
        arrived = on_hook(b, "arrived", "InitQueue")
        clock.advance(1000)
        assert arrived.wait(60), "F's timer never fired"
        assert _texts(_receive(b, "InitQueue")) == [DIALOG_TIMER]
        _stream_resumes(b)


def _stream_resumes(b: sbroker.Broker) -> None:
    """The dead reader's claim is taken back; its planned batch (s0, s1) is read again and
    received once, then the rest; a new message lands after every old position."""
    source = streams.StreamSource(b, "StreamQueue")
    source.claim(wait=0)
    planned = source.planned
    queue_id = source.queue.queue_id
    assert [r[5].decode() for r in streams.read_range(b, queue_id, 0, planned)] == ["s0", "s1"]
    assert source.commit(planned) == 2
    end = source.latest(10)
    assert [r[5].decode() for r in streams.read_range(b, queue_id, planned, end)] == [
        "s2", "s3"]
    assert source.commit(end) == 2
    assert source.latest(10) == end
    source.release()
