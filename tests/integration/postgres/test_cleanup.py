"""Ghost cleanup on PostgreSQL (storage/postgres/cleanup.py): a broker's session thread starts a
VACUUM of sb_messages once received messages' dead rows pile up, so that RECEIVE does not step
over their index entries until autovacuum comes."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from support.helpers import begin_and_send
from support.postgres import RunServer

from sbroker import Broker
from sbroker.storage.postgres import cleanup


def _vacuums(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT vacuum_count FROM pg_stat_user_tables"
                       " WHERE relname = 'sb_messages'").fetchone()
    assert row is not None
    return int(row[0])


def _dead_rows(conn: psycopg.Connection[Any]) -> int:
    """Dead rows of sb_messages, counted on the table itself (the statistics lag)."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
    row = conn.execute("SELECT dead_tuple_count FROM pgstattuple('sb_messages')").fetchone()
    assert row is not None
    return int(row[0])


def test_a_vacuum_is_due_past_a_floor_that_grows_with_the_table() -> None:
    assert not cleanup.due(999, 0, min_dead=1000, fraction=0.02)
    assert cleanup.due(1000, 0, min_dead=1000, fraction=0.02)
    assert not cleanup.due(2999, 100_000, min_dead=1000, fraction=0.02)
    assert cleanup.due(3000, 100_000, min_dead=1000, fraction=0.02)


def test_a_vacuum_removes_the_received_messages_dead_rows(pg_pair: Broker, pg_url: str) -> None:
    begin_and_send(pg_pair, *(f"m{i}" for i in range(20)))
    with pg_pair.transaction() as tx:
        assert len(tx.receive("TargetQueue")) == 20
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert _dead_rows(conn) >= 20
        assert cleanup.vacuum(conn)
        assert _dead_rows(conn) == 0


def test_nothing_starts_before_the_dead_rows_are_due(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def never() -> psycopg.Connection[Any]:
        raise AssertionError("a VACUUM started")

    Broker.open(pg_url).close()
    monkeypatch.setattr(cleanup, "MIN_DEAD", 10**9)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert not cleanup.Cleanup(never).after_heartbeat(conn)


def test_a_vacuum_that_fails_is_logged_not_raised(
        pg_pair: Broker, pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    with psycopg.connect(pg_url) as conn:  # in a transaction block, where VACUUM cannot run
        assert not cleanup.vacuum(conn)
    assert "could not vacuum sb_messages" in caplog.text
    assert "inside a transaction block" in caplog.text


def test_the_session_thread_starts_a_vacuum_after_its_heartbeat(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "MIN_DEAD", 0)
    monkeypatch.setattr(cleanup, "FRACTION", 0.0)
    ran = threading.Event()
    real = cleanup.vacuum

    def spy(conn: psycopg.Connection[Any]) -> bool:
        vacuumed = real(conn)
        if vacuumed:
            ran.set()
        return vacuumed

    monkeypatch.setattr(cleanup, "vacuum", spy)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        Broker.open(pg_url).close()  # the schema, so that the statistics have the table
        before = _vacuums(conn)
        b = Broker.open(pg_url)
        try:
            assert ran.wait(30), "the session thread did not start a VACUUM within 30 s"
            assert _vacuums(conn) > before
        finally:
            b.close()


def test_only_a_role_that_may_vacuum_the_table_starts_one(
        postgres: RunServer, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    Broker.open(pg_url).close()
    monkeypatch.setattr(cleanup, "MIN_DEAD", 0)
    monkeypatch.setattr(cleanup, "FRACTION", 0.0)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # the owner
        owner = cleanup.Cleanup(lambda: psycopg.connect(pg_url, autocommit=True))
        assert owner.after_heartbeat(conn)
        owner.close()
    postgres.server.sql("CREATE ROLE sb_user LOGIN")
    try:
        with psycopg.connect(pg_url.replace("postgres@", "sb_user@"), autocommit=True) as conn:
            def never() -> psycopg.Connection[Any]:
                raise AssertionError("a VACUUM started")

            assert not cleanup.Cleanup(never).after_heartbeat(conn)
    finally:
        postgres.server.sql("DROP ROLE sb_user")
