"""A SQLite connection that speaks the seam's :class:`~sbroker.storage.ports.Connection`:
explicit transactions, ``query_one`` / ``query_all``, and the engine's named statements as
``conn.sql.<name>`` (the blocks of ``queries.sql``).

It subclasses ``sqlite3.Connection`` rather than wrapping it, so that ``execute`` stays the
C call it is: the engine's hot paths pay nothing for the seam.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from sbroker.storage.queries import Queries, load

SQL = load("sbroker.storage.sqlite", "queries.sql")
BACKEND = load("sbroker.storage.sqlite", "backend.sql")  # this backend's own statements


class SqliteConnection(sqlite3.Connection):
    """Open with ``sqlite3.connect(..., factory=SqliteConnection, isolation_level=None)``."""

    sql: Queries = SQL
    dialect = "sqlite"

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.execute(sql, params).fetchone()
        return row

    def query_all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.execute(sql, params).fetchall()

    @staticmethod
    def ids(values: Iterable[Any]) -> str:
        """A list as one statement parameter: JSON text, read with ``json_each(?)``."""
        return json.dumps(list(values))

    def begin(self, *, write: bool = False) -> None:
        """BEGIN (a read snapshot from the first read) or BEGIN IMMEDIATE (the write lock
        now, so that the transaction never fails to upgrade later)."""
        self.execute("BEGIN IMMEDIATE" if write else "BEGIN")
