"""Ghost cleanup on PostgreSQL (storage/postgres/cleanup.py): a broker's session thread vacuums
sb_messages once received messages' dead rows pile up, so that RECEIVE does not step over
their index entries until autovacuum comes."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from support.helpers import begin_and_send

from sbroker import Broker
from sbroker.storage.postgres import cleanup


def _vacuums(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT vacuum_count FROM pg_stat_user_tables"
                       " WHERE relname = 'sb_messages'").fetchone()
    assert row is not None
    return int(row[0])


def test_a_vacuum_is_due_past_a_floor_that_grows_with_the_table() -> None:
    assert not cleanup.due(999, 0, min_dead=1000, fraction=0.02)
    assert cleanup.due(1000, 0, min_dead=1000, fraction=0.02)
    assert not cleanup.due(2999, 100_000, min_dead=1000, fraction=0.02)
    assert cleanup.due(3000, 100_000, min_dead=1000, fraction=0.02)


def test_clean_up_vacuums_the_messages_table_when_due_and_not_before(
        pg_pair: Broker, pg_url: str) -> None:
    begin_and_send(pg_pair, *(f"m{i}" for i in range(20)))
    with pg_pair.transaction() as tx:
        assert len(tx.receive("TargetQueue")) == 20
    with psycopg.connect(pg_url, autocommit=True) as conn:
        before = _vacuums(conn)
        assert not cleanup.clean_up(conn, min_dead=10**9)
        assert _vacuums(conn) == before
        assert cleanup.clean_up(conn, min_dead=0, fraction=0)
        assert _vacuums(conn) == before + 1


def test_the_session_thread_cleans_up_after_its_heartbeat(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "MIN_DEAD", 0)
    monkeypatch.setattr(cleanup, "FRACTION", 0.0)
    ran = threading.Event()
    real = cleanup.clean_up

    def spy(conn: psycopg.Connection[Any], **kw: Any) -> bool:
        vacuumed = real(conn, **kw)
        if vacuumed:
            ran.set()
        return vacuumed

    monkeypatch.setattr(cleanup, "clean_up", spy)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        Broker.open(pg_url).close()  # the schema, so that the statistics have the table
        before = _vacuums(conn)
        b = Broker.open(pg_url)
        try:
            assert ran.wait(30), "the session thread did not vacuum within 30 s"
            assert _vacuums(conn) > before
        finally:
            b.close()


def test_a_vacuum_that_fails_is_logged_not_raised(
        pg_pair: Broker, pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    with psycopg.connect(pg_url) as conn:  # in a transaction block, where VACUUM cannot run
        assert not cleanup.clean_up(conn, min_dead=0, fraction=0)
    assert "could not vacuum sb_messages" in caplog.text
    assert "inside a transaction block" in caplog.text
