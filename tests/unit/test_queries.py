"""Named SQL blocks: parsing, clear errors for a missing or repeated name."""

from __future__ import annotations

import pytest

from sbroker.core.errors import BrokerError
from sbroker.storage.queries import load, parse

TEXT = """
-- A file comment before any block is ignored.
-- name: first
-- What the block is for.
SELECT 1
  FROM t;

-- name: second
UPDATE t SET x = ? WHERE y = ?
"""


def test_blocks_are_found_by_name_without_comments_or_trailing_semicolon() -> None:
    queries = parse(TEXT, "test.sql")
    assert dict(queries) == {
        "first": "SELECT 1\n  FROM t", "second": "UPDATE t SET x = ? WHERE y = ?"}


def test_a_missing_name_says_which_file_was_looked_in() -> None:
    with pytest.raises(BrokerError, match=r"no SQL block named 'third' in test.sql"):
        parse(TEXT, "test.sql")["third"]


def test_a_name_given_twice_is_refused() -> None:
    with pytest.raises(BrokerError, match="appears twice"):
        parse("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n", "dup.sql")


def test_an_empty_block_is_refused() -> None:
    with pytest.raises(BrokerError, match="is empty"):
        parse("-- name: a\n-- only a comment\n", "empty.sql")


def test_every_backend_defines_the_same_engine_statements() -> None:
    """The engine asks each backend for its statements by name: one missing on a backend
    would only fail when that statement runs there."""
    sqlite = set(load("sbroker.storage.sqlite", "queries.sql"))
    postgres = set(load("sbroker.storage.postgres", "queries.sql"))
    assert sorted(sqlite - postgres - SERIAL_WRITER_ONLY) == []
    assert sorted(postgres - sqlite - CONCURRENT_WRITERS_ONLY) == []


# A single writer numbers direct SENDs in a statement of its own and deletes them again when
# one of a commit's could not go (storage/sqlite/sends.py); on PostgreSQL send_direct numbers
# under the conversation's lock and the function is all or nothing.
SERIAL_WRITER_ONLY = {"bump_send_seq", "unsend_direct"}
# A commit's many SENDs in one statement whose answer comes with COMMIT
# (storage/postgres/sends.py): a single writer runs send_direct once per message instead.
CONCURRENT_WRITERS_ONLY = {"send_direct_many"}


@pytest.mark.parametrize("package", ["scheduler", "poison", "dashboard", "pipeline"])
def test_every_application_has_the_same_statements_on_every_backend(package: str) -> None:
    where = f"sbroker.apps.{package}"
    assert set(load(where, "sqlite.sql")) == set(load(where, "postgresql.sql"))
