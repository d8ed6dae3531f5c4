"""A psycopg connection that speaks the seam's :class:`~sbroker.storage.ports.Connection`.

Connections run in autocommit mode and transactions are opened with an explicit ``BEGIN``
(``begin``), so that the store decides where a transaction starts and ends: a broker
transaction's group locks live exactly as long as its PostgreSQL transaction.

Application statements (``tx.execute``) may be written with SQLite's ``?`` placeholders
(and ``:name`` with a dict) as well as psycopg's own ``%s`` / ``%(name)s``: a statement with
``?`` outside quotes and comments is translated once (cached), so that code written for one
backend runs on the other.  A statement that uses the ``?`` operators of jsonb must use
``%s`` placeholders.

Round trips are what a transaction costs on PostgreSQL, so statements whose result nobody
reads yet wait and go with the next one that is read (``batched``: a commit's writes and its
COMMIT travel together; ``begin``: BEGIN goes with the transaction's first statement).  A batch
is one simple query of several statements, their parameters bound client-side (psycopg's
ClientCursor); each statement's result is kept for its :class:`Deferred` cursor.  A commit that
only receives is one round trip, a RECEIVE another. The statements of every send and RECEIVE
are prepared once per connection and run as ``EXECUTE`` in the batch (planned once, not at
each call); psycopg prepares nothing itself, as its DEALLOCATE ALL after a ROLLBACK would
drop them.

A connection lost before its first statement (the server restarted while it sat in the
pool) is replaced and the statement run again; one lost during a transaction raises
:class:`~sbroker.core.errors.DatabaseError` saying the transaction was rolled back.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import ExecStatus, TransactionStatus

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


@functools.lru_cache(maxsize=1024)
def _pieces(sql: str) -> tuple[str, ...] | None:
    """``sql`` cut at its ``%s`` placeholders (``%%`` made ``%``); None if it has others."""
    parts = sql.replace("%%", "\0").split("%s")
    if any("%" in part for part in parts):
        return None  # %(name)s, %b, %t: psycopg's
    return tuple(part.replace("\0", "%") for part in parts)


def _literal(value: Any) -> str | None:
    """A literal for the common parameter types (None: leave it to psycopg)."""
    kind = type(value)
    if value is None:
        return "NULL"
    if kind is int:
        return str(value)
    if kind is str:
        return None if "\0" in value else "'" + value.replace("'", "''") + "'"
    if kind is bool:
        return "'1'" if value else "'0'"
    if kind is float:
        return repr(value) if math.isfinite(value) else None
    if kind is bytes:
        return "'\\x" + bytes.hex(value) + "'::bytea"
    return None


def render(sql: str, parameters: Any) -> str | None:
    """``sql`` with its ``%s`` parameters as literals (standard_conforming_strings on), or
    None when a parameter or placeholder is not one of the common kinds: psycopg's mogrify
    then does it (slower)."""
    values = literals(parameters)
    pieces = _pieces(sql) if values is not None else None
    if values is None or pieces is None or len(pieces) != len(values) + 1:
        return None
    return _between(pieces, values)


def _between(pieces: tuple[str, ...], values: Sequence[str]) -> str:
    """The pieces of a statement cut at its placeholders, with ``values`` put back between."""
    out = [pieces[0]]
    for value, piece in zip(values, pieces[1:], strict=True):
        out.append(value)
        out.append(piece)
    return "".join(out)


def literals(parameters: Any) -> list[str] | None:
    """Each parameter as a literal, or None when one is not of the common kinds."""
    if not isinstance(parameters, (tuple, list)):
        return None
    out = []
    for value in parameters:
        literal = _literal(value)
        if literal is None:
            return None
        out.append(literal)
    return out


# -- prepared statements ----------------------------------------------------------------------
# A batch is a simple query, and a simple query's statements are planned every time they
# run: for the statements of every send and RECEIVE that planning cost more than running
# them (pg_stat_statements with track_planning shows it for ready_senders). So each
# connection PREPAREs them once, when the pool first lends it, and a batch runs
# ``EXECUTE name(literals)`` instead: the plan is kept for the connection's life.
# Only statements whose generic plan cannot go wrong as tables grow: a function call, an
# INSERT, a row by key (ready_senders is a function that fetches by key since migration
# 0008). An UPDATE of the rows a JSON list names keeps being planned with its literals: its
# generic plan, made while a table is small, scans the table whole.
HOT = ("ready_senders", "lock_conversations", "insert_message", "insert_messages_json",
       "set_send_seq", "send_direct", "send_direct_many", "receive_take_next",
       "receive_fetch", "receive_fetch_handle", "reset_rollback_count")
HOT_BACKEND = ("consume", "set_send_seqs_bulk")


def _numbered(sql: str) -> str:
    """``sql`` with its ``%s`` placeholders as ``$1``, ``$2``...; ``%%`` as ``%``."""
    pieces = _pieces(sql)
    if pieces is None:
        raise ValueError(f"not a %s statement: {sql[:60]}")
    return _between(pieces, [f"${number}" for number in range(1, len(pieces))])


PREPARED: dict[str, str] = {
    **{getattr(SQL, name): f"sb_{name}" for name in HOT},
    **{getattr(BACKEND, name): f"sb_{name}" for name in HOT_BACKEND},
}
"""The statements every connection prepares, by their text: the prepared statement's name."""

PREPARE_ALL = ";\n".join(f"PREPARE {name} AS {_numbered(sql)}"
                         for sql, name in PREPARED.items())
"""Sent once per connection, before its first batch (a prepared statement is the session's,
whatever becomes of the transaction it was made in)."""


def lost(exc: BaseException) -> DatabaseError:
    """The one-line error for a connection that broke under a statement."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return DatabaseError(
        f"the connection to PostgreSQL was lost ({first}): the transaction was rolled back;"
        " run it again (the broker reconnects by itself)")


class Deferred:
    """The cursor of a statement sent later, with the next one whose result is read."""

    __slots__ = ("_conn", "_pos", "_result", "_rowcount", "_rows", "done")

    def __init__(self, conn: PgConnection) -> None:
        self._conn = conn
        self._rows: list[Any] = []
        self._pos = 0
        self._rowcount = -1
        self._result: Any = None
        self.done = False

    def take(self, cursor: psycopg.ClientCursor[Any]) -> None:
        """Keep the cursor's current result (one statement of a batch)."""
        self._rowcount = cursor.rowcount
        result = cursor.pgresult
        if result is not None and result.status == ExecStatus.TUPLES_OK:
            self._result = result
            self._rows = cursor.fetchall()
        self.done = True

    def _wait(self) -> None:
        if not self.done:
            self._conn.flush()

    @property
    def rowcount(self) -> int:
        self._wait()
        return self._rowcount

    @property
    def description(self) -> Any:
        """The column names (the first item of each entry, as DB-API's), or None."""
        self._wait()
        result = self._result
        if result is None:
            return None
        return [(result.fname(i).decode(),) for i in range(result.nfields)]

    def fetchone(self) -> Any:
        self._wait()
        if self._pos >= len(self._rows):
            return None
        self._pos += 1
        return self._rows[self._pos - 1]

    def fetchall(self) -> list[Any]:
        self._wait()
        rows, self._pos = self._rows[self._pos:], len(self._rows)
        return rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class PgConnection:
    """One pooled psycopg connection, for one thread at a time."""

    dialect = "postgresql"
    sql: Queries = SQL

    def __init__(self, raw: psycopg.Connection[Any],
                 replace: Callable[[psycopg.Connection[Any]], psycopg.Connection[Any]]
                 ) -> None:
        self.raw = raw
        self._replace = replace  # gives a broken connection back, returns a fresh one
        self._client = psycopg.ClientCursor(raw)
        # With standard_conforming_strings (the default) a quote doubled is a string quoted.
        self._standard = raw.info.parameter_status("standard_conforming_strings") == "on"
        self._used = False  # a statement ran since it came out of the pool
        self._begin = False  # BEGIN not sent yet: it goes with the next statement
        self._batching = False
        self._queue: list[tuple[str, Deferred | None]] = []

    # -- statements ---------------------------------------------------------------------------
    @staticmethod
    def _placeholders(sql: str, parameters: Any) -> tuple[str, Any]:
        if parameters is not None:
            if not parameters:
                return sql, None
            if isinstance(parameters, Mapping):
                if ":" in sql and "%(" not in sql:
                    sql = translate(sql, True)
            elif "?" in sql and "%s" not in sql:
                sql = translate(sql, False)
        return sql, parameters

    def execute(self, sql: str, parameters: Any = None, /) -> Any:
        sql, parameters = self._placeholders(sql, parameters)
        if self._batching or self._begin or sql in PREPARED:
            later = self._later(sql, parameters)
            if not self._batching:
                self.flush()
            return later
        try:
            cursor = self.raw.execute(sql, parameters)
        except psycopg.OperationalError as exc:
            cursor = self._failed(exc, lambda: self.raw.execute(sql, parameters))
        self._used = True
        return cursor

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Any:
        rows = list(parameters)
        bulk = BULK.get(sql) if len(rows) > 1 else None
        if bulk is not None:  # one statement for all the rows instead of one per row
            statement, pack = bulk
            return self.execute(statement, pack(rows))
        if rows:
            sql = self._placeholders(sql, rows[0])[0]
        if self._batching or self._begin:
            last: Any = self._nothing()
            for row in rows:
                last = self._later(sql, row)
            if not self._batching:
                self.flush()
            return last
        many = self.raw.cursor()
        try:
            many.executemany(sql, rows)
        except psycopg.OperationalError as exc:
            self._failed(exc, lambda: self.raw.cursor().executemany(sql, rows))
        self._used = True
        return many

    def _nothing(self) -> Deferred:
        done = Deferred(self)
        done.done = True
        return done

    def _later(self, sql: str, parameters: Any) -> Deferred:
        """Queue a statement (after BEGIN if one is owed); its cursor-to-be."""
        if self._begin:
            self._begin = False
            self._queue.append(("BEGIN", None))
        result = Deferred(self)
        self._queue.append((self._text(sql, parameters), result))
        return result

    def _text(self, sql: str, parameters: Any) -> str:
        """The statement with its parameters bound: EXECUTE of its prepared statement if it
        has one, else the statement with literals."""
        if parameters is None:
            return sql
        if self._standard:
            name = PREPARED.get(sql)
            values = literals(parameters) if name is not None else None
            if values is not None:
                return f"EXECUTE {name}({', '.join(values)})"
            text = render(sql, parameters)
            if text is not None:
                return text
        return self._client.mogrify(sql, parameters)

    def flush(self) -> None:
        """Send the queued statements as one simple query; keep each one's result."""
        if not self._queue:
            return
        queue, self._queue = self._queue, []
        text = ";\n".join(statement for statement, _ in queue)

        def send() -> psycopg.ClientCursor[Any]:
            if not getattr(self.raw, "_sb_prepared", False):
                self._client.execute(PREPARE_ALL)
                self.raw._sb_prepared = True  # type: ignore[attr-defined]
            return self._client.execute(text)

        try:
            cursor = send()
        except psycopg.OperationalError as exc:
            cursor = self._failed(exc, send)
        except pg_errors.InvalidSqlStatementName:
            # The application's own DISCARD ALL or DEALLOCATE dropped them: this
            # transaction fails, the next one prepares them again.
            self.raw._sb_prepared = False  # type: ignore[attr-defined]
            raise
        self._used = True
        for _, result in queue:
            if result is not None:
                result.take(cursor)
            cursor.nextset()

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
        self._client = psycopg.ClientCursor(self.raw)
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
    def ids(values: Iterable[Any]) -> str:
        """A list as one statement parameter: JSON text (``= ANY (sb_bigints(%s::jsonb))``):
        psycopg binds one string much faster than an array's elements."""
        return json.dumps(list(values))

    # -- transactions ---------------------------------------------------------------------------
    @property
    def in_transaction(self) -> bool:
        return (self._begin or bool(self._queue)
                or self.raw.info.transaction_status != TransactionStatus.IDLE)

    def begin(self, *, write: bool = False) -> None:
        """BEGIN (READ COMMITTED: each statement sees what was committed before it), sent
        with the next statement."""
        self._begin = True

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        """Statements inside wait until a result is read, or the end (COMMIT)."""
        self._batching = True
        try:
            yield
            self.flush()
        except BaseException:
            self._queue.clear()
            raise
        finally:
            self._batching = False

    def commit(self) -> None:
        if self._begin:  # nothing was sent: nothing to commit
            self._begin = False
            return
        self._queue.append(("COMMIT", None))
        try:
            self.flush()
        except DatabaseError as exc:
            raise DatabaseError(
                f"{exc} (lost during COMMIT: whether the transaction committed is unknown)"
            ) from exc

    def rollback(self) -> None:
        self._begin = False
        self._queue.clear()
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


def _pack_messages(rows: list[Any]) -> tuple[str, bytes]:
    """insert_message rows as insert_messages_json takes them: JSON rows, one bytea."""
    meta: list[list[Any]] = []
    bodies: list[bytes] = []
    offset = 1
    for row in rows:
        body = row[10]
        meta.append([*row[:10], *row[11:], offset, len(body)])
        bodies.append(body)
        offset += len(body)
    return json.dumps(meta), b"".join(bodies)


def _pack_pairs(rows: list[Any]) -> tuple[str]:
    return (json.dumps([list(row) for row in rows]),)


def _pack_seqs(rows: list[Any]) -> tuple[str, str]:
    """set_send_seq rows ``(send_seq, conv_order)`` as set_send_seqs_bulk takes them."""
    return json.dumps({str(order): seq for seq, order in rows}), json.dumps(
        [order for _, order in rows])


BULK: dict[str, tuple[str, Callable[[list[Any]], Sequence[Any]]]] = {
    SQL.insert_message: (SQL.insert_messages_json, _pack_messages),
    SQL.set_send_seq: (BACKEND.set_send_seqs_bulk, _pack_seqs),
    SQL.retain_received: (BACKEND.retain_received_bulk, _pack_pairs),
}
"""Statements the engine runs with ``executemany`` whose rows go in one statement."""
