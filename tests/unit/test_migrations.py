"""The numbered migrations add up to the schema: a database made by the migrations has
exactly ``storage/sqlite/schema.sql``, and a database left at any earlier version is brought
up to the same schema on open, its messages intact."""

from __future__ import annotations

import sqlite3
import uuid
from importlib import resources
from pathlib import Path

import pytest

import sbroker
from sbroker.storage.migrate import migrations, statements
from sbroker.storage.sqlite.connector import APPLICATION_ID, MIGRATIONS, schema_of

SCHEMA = resources.files("sbroker.storage.sqlite").joinpath("schema.sql")


def database_at(path: Path, version: int) -> None:
    """A file as a release with only the first ``version`` migrations left it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for migration in MIGRATIONS[:version]:
        for statement in statements(migration.text, sqlite3.complete_statement):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("INSERT INTO sb_meta(key, value) VALUES ('broker_instance', ?),"
                 " ('catalog_version', '0'), ('honor_broker_priority', '0')",
                 (str(uuid.uuid4()).upper(),))
    # One conversation with a message waiting in the target queue (schema 1's columns).
    conn.execute("INSERT INTO sb_queues(queue_id, name) VALUES (1, 'I'), (2, 'T')")
    conn.execute("INSERT INTO sb_services(service_id, name, queue_id) VALUES (1, 'IS', 1),"
                 " (2, 'TS', 2)")
    conn.execute("INSERT INTO sb_service_contracts VALUES (2, 'DEFAULT')")
    for order, (handle, initiator, group, queue, service, far) in enumerate([
            ("A" * 8 + "-0000-0000-0000-" + "0" * 12, 1, "G1", 1, "IS", "TS"),
            ("B" * 8 + "-0000-0000-0000-" + "0" * 12, 0, "G2", 2, "TS", "IS")], start=1):
        conn.execute(
            "INSERT INTO sb_endpoints(conv_order, handle, conversation_id, is_initiator,"
            " group_id, queue_id, service, far_service, contract, state, priority, send_seq,"
            " receive_seq, lifetime_expires, created_at) VALUES"
            " (?, ?, 'C', ?, ?, ?, ?, ?, 'DEFAULT', 'CO', 5, ?, ?, 9e18, 0)",
            (order, handle, initiator, group, queue, service, far, initiator, 1 - initiator))
    conn.execute(
        "INSERT INTO sb_messages(queue_id, group_id, handle, conv_order, msn, status, priority,"
        " message_type, validation, body, message_id, service, contract) VALUES"
        " (2, 'G2', ?, 2, 0, 1, 5, 'DEFAULT', 'N', x'6b657074', 'M', 'TS', 'DEFAULT')",
        ("B" * 8 + "-0000-0000-0000-" + "0" * 12,))
    conn.execute("COMMIT")
    conn.close()


def test_the_migrations_add_up_to_the_schema(tmp_path: Path) -> None:
    sbroker.Broker.open(tmp_path / "new.db").close()
    expected = SCHEMA.read_text("utf-8").strip().split("\n\n")
    assert schema_of(tmp_path / "new.db") == expected, (
        "the migrations and storage/sqlite/schema.sql differ: after adding a migration, "
        "write the new schema with `python -m tools.schema`")


@pytest.mark.parametrize("version", range(1, len(MIGRATIONS)))
def test_a_database_of_an_earlier_version_is_migrated_on_open(tmp_path: Path,
                                                              version: int) -> None:
    path = tmp_path / f"v{version}.db"
    database_at(path, version)
    with sbroker.Broker.open(path) as b:
        with b.transaction() as tx:
            [msg] = tx.receive("T")
        assert msg.text() == "kept"
    sbroker.Broker.open(tmp_path / "new.db").close()
    assert schema_of(path) == schema_of(tmp_path / "new.db")


def test_the_migrations_are_numbered_without_gaps() -> None:
    numbers = [m.number for m in migrations("sbroker.storage.sqlite")]
    assert numbers == list(range(1, len(numbers) + 1))
