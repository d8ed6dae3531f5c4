"""The numbered migrations add up to the schema: a database made by the migrations has
exactly ``storage/sqlite/schema.sql``, and a database left at any earlier version is brought
up to the same schema on open, its messages intact."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
from support.helpers import database_at

import sbroker
from sbroker.storage.migrate import migrations
from sbroker.storage.sqlite.connector import MIGRATIONS, schema_of

SCHEMA = resources.files("sbroker.storage.sqlite").joinpath("schema.sql")


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
