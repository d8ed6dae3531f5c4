"""PostgreSQL's numbered migrations: a database left at an earlier version by an older
sbroker is brought up to date on open, its messages intact."""

from __future__ import annotations

import uuid

import psycopg

import sbroker
from sbroker.storage.migrate import migrations
from sbroker.storage.postgres.connector import MIGRATIONS


def test_the_migrations_are_numbered_without_gaps() -> None:
    numbers = [m.number for m in migrations("sbroker.storage.postgres")]
    assert numbers == list(range(1, len(numbers) + 1))


def test_a_database_at_version_1_is_migrated_on_open_and_keeps_its_messages(
        pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(MIGRATIONS[0].text)
        conn.execute("INSERT INTO sb_migrations(version) VALUES (1)")
        conn.execute("INSERT INTO sb_meta(key, value) VALUES ('broker_instance', %s),"
                     " ('catalog_version', '0'), ('honor_broker_priority', '0')",
                     (str(uuid.uuid4()).upper(),))
        conn.execute("INSERT INTO sb_queues(queue_id, name) VALUES (1, 'I'), (2, 'T')")
        conn.execute("INSERT INTO sb_services(service_id, name, queue_id)"
                     " VALUES (1, 'IS', 1), (2, 'TS', 2)")
        conn.execute("INSERT INTO sb_service_contracts VALUES (2, 'DEFAULT')")
        conn.execute(
            "INSERT INTO sb_endpoints(handle, conversation_id, is_initiator, group_id, queue_id,"
            " service, far_service, contract, state, priority, send_seq, receive_seq,"
            " lifetime_expires, created_at) VALUES"
            " ('AAAAAAAA-0000-0000-0000-000000000000', 'C', 1, 'G1', 1, 'IS', 'TS', 'DEFAULT',"
            "  'CO', 5, 1, 0, 9e18, 0),"
            " ('BBBBBBBB-0000-0000-0000-000000000000', 'C', 0, 'G2', 2, 'TS', 'IS', 'DEFAULT',"
            "  'CO', 5, 0, 1, 9e18, 0)")
        conn.execute(
            "INSERT INTO sb_messages(queue_id, group_id, handle, conv_order, msn, status,"
            " priority, message_type, validation, body, message_id, service, contract) VALUES"
            " (2, 'G2', 'BBBBBBBB-0000-0000-0000-000000000000', 2, 0, 1, 5, 'DEFAULT', 'N',"
            "  'kept', 'M', 'TS', 'DEFAULT')")
    with sbroker.Broker.open(pg_url) as b, b.transaction() as tx:
        [msg] = tx.receive("T")
        assert msg.text() == "kept"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        [(version,)] = conn.execute("SELECT max(version) FROM sb_migrations").fetchall()
    assert version == len(MIGRATIONS)


def test_the_receive_loop_walks_the_ready_index_even_after_analyze(pg_url: str) -> None:
    """sb_lock_next's loop must not sort the queue on every RECEIVE once the table has
    statistics (0007): a migration that replaces the function must keep its setting."""
    sbroker.Broker.open(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute("SELECT proconfig FROM pg_proc WHERE proname = 'sb_lock_next'"
                           ).fetchone()
    assert row is not None and "enable_sort=off" in (row[0] or [])
