"""A psycopg connection that speaks the seam's :class:`~sbroker.storage.ports.Connection`.

Connections run in autocommit mode and transactions are opened with an explicit ``BEGIN``
(``begin``), so that the store decides where a transaction starts and ends: a broker
transaction's group locks live exactly as long as its PostgreSQL transaction.

Application statements (``tx.execute``) may be written with SQLite's ``?`` placeholders
(and ``:name`` with a dict) as well as psycopg's own ``%s`` / ``%(name)s``: a statement with
``?`` outside quotes and comments is translated once (cached), so that code written for one
backend runs on the other.  A statement that uses the ``?`` operators of jsonb must use
``%s`` placeholders.

A connection lost before its first statement (the server restarted while it sat in the
pool) is replaced and the statement run again; one lost during a transaction raises
:class:`~sbroker.core.errors.DatabaseError` saying the transaction was rolled back.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from sbroker.core.errors import CommitConflictError, DatabaseError
from sbroker.storage.queries import Queries, load

SQL = load("sbroker.storage.postgres", "queries.sql")
BACKEND = load("sbroker.storage.postgres", "backend.sql")

_TOKENS = re.compile(
    r"""('(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|/\*.*?\*/|(\$[A-Za-z_]*\$).*?\2"""
    r"""|::|\?(?![|&])|:[A-Za-z_][A-Za-z0-9_]*|%)""",
    re.DOTALL,
)


@functools.lru_cache(maxsize=512)
def translate(sql: str, named: bool) -> str:
    """``sql`` with ``?`` (or, ``named``, ``:name``) placeholders as psycopg's, and literal
    percent signs doubled; unchanged when it has none."""
    found = False

    def swap(match: re.Match[str]) -> str:
        nonlocal found
        token = match.group(0)
        if token == "%":
            return "%%"
        if token == "?" and not named:
            found = True
            return "%s"
        if token.startswith(":") and token != "::" and named:
            found = True
            return f"%({token[1:]})s"
        if token[0] in "'\"$" or token.startswith(("--", "/*")):
            return token.replace("%", "%%")
        return token

    out = _TOKENS.sub(swap, sql)
    return out if found else sql


def lost(exc: BaseException) -> DatabaseError:
    """The one-line error for a connection that broke under a statement."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return DatabaseError(
        f"the connection to PostgreSQL was lost ({first}): the transaction was rolled back;"
        " run it again (the broker reconnects by itself)")


class PgConnection:
    """One pooled psycopg connection, for one thread at a time."""

    dialect = "postgresql"
    sql: Queries = SQL

    def __init__(self, raw: psycopg.Connection[Any],
                 replace: Callable[[psycopg.Connection[Any]], psycopg.Connection[Any]]
                 ) -> None:
        self.raw = raw
        self._replace = replace  # gives a broken connection back, returns a fresh one
        self._used = False  # a statement ran since it came out of the pool

    # -- statements ---------------------------------------------------------------------------
    def execute(self, sql: str, parameters: Any = None, /) -> Any:
        if parameters is not None:
            if not parameters:
                parameters = None
            elif isinstance(parameters, Mapping):
                if ":" in sql and "%(" not in sql:
                    sql = translate(sql, True)
            elif "?" in sql and "%s" not in sql:
                sql = translate(sql, False)
        try:
            cursor = self.raw.execute(sql, parameters)
        except psycopg.OperationalError as exc:
            cursor = self._failed(exc, lambda: self.raw.execute(sql, parameters))
        self._used = True
        return cursor

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Any:
        rows = list(parameters)
        if rows and isinstance(rows[0], Mapping):
            if ":" in sql and "%(" not in sql:
                sql = translate(sql, True)
        elif rows and "?" in sql and "%s" not in sql:
            sql = translate(sql, False)
        cursor = self.raw.cursor()
        try:
            cursor.executemany(sql, rows)
        except psycopg.OperationalError as exc:
            self._failed(exc, lambda: self.raw.cursor().executemany(sql, rows))
        self._used = True
        return cursor

    def _failed(self, exc: psycopg.OperationalError, again: Callable[[], Any]) -> Any:
        """A statement failed with an operational error: retry it on a fresh connection when
        this one broke before it did anything, else raise the error in sbroker's words."""
        if isinstance(exc, pg_errors.DeadlockDetected):
            raise CommitConflictError(
                "the transaction was chosen as a deadlock victim and rolled back: run it"
                " again", 1205) from exc
        if not self.raw.broken and not self.raw.closed:
            raise exc
        if self._used:
            raise lost(exc) from exc
        self.raw = self._replace(self.raw)
        try:
            return again()
        except psycopg.OperationalError as second:
            if self.raw.broken or self.raw.closed:
                raise lost(second) from second
            raise

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.execute(sql, params).fetchone()
        return row

    def query_all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self.execute(sql, params).fetchall()
        return rows

    @staticmethod
    def ids(values: Iterable[Any]) -> list[Any]:
        """A list as one statement parameter: an array (``= ANY(%s::bigint[])``)."""
        return list(values)

    # -- transactions ---------------------------------------------------------------------------
    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != TransactionStatus.IDLE

    def begin(self, *, write: bool = False) -> None:
        """BEGIN (READ COMMITTED: each statement sees what was committed before it)."""
        self.execute("BEGIN")

    def commit(self) -> None:
        try:
            self.raw.execute("COMMIT")
        except psycopg.OperationalError as exc:
            if self.raw.broken or self.raw.closed:
                raise DatabaseError(
                    f"the connection to PostgreSQL was lost during COMMIT ({exc}): whether"
                    " the transaction committed is unknown") from exc
            raise

    def rollback(self) -> None:
        if self.raw.broken or self.raw.closed:
            return  # the server rolled it back when the connection went
        try:
            self.raw.execute("ROLLBACK")
        except psycopg.OperationalError:
            if not (self.raw.broken or self.raw.closed):
                raise

    @property
    def usable(self) -> bool:
        return not (self.raw.broken or self.raw.closed)
