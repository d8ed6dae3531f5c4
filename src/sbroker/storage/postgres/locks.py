"""The storage half of a broker transaction on PostgreSQL
(:class:`~sbroker.storage.ports.TxStorage`).

A broker transaction keeps one pooled connection.  Its statements' reads run there in
autocommit until it needs a PostgreSQL transaction: RECEIVE, GET CONVERSATION GROUP, MOVE
CONVERSATION (group locks) and application writes (``tx.execute``) open one with ``BEGIN``,
and it lasts until the broker transaction ends, so that:

- a conversation group is held by a transaction-level advisory lock (``sb_take`` and friends
  in migrations/0002_locks.sql): other groups go on in parallel on any host, the lock goes
  with the transaction at COMMIT or ROLLBACK, and with the connection if the process or its
  host dies (the group is free again at once, or when keepalives give up);
- COMMIT applies the recorded effects on that same connection and commits once: the received
  rows leave and the group lock goes in the same instant;
- ROLLBACK undoes it all, then the poison count of the RECEIVEs it rolled back is committed
  in a transaction of its own (it must survive the rollback it counts).

Nothing here writes while a transaction holds a group: a long transaction costs its
connection (and an idle-in-transaction backend that holds no snapshot), not other work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from psycopg import errors as pg_errors

from sbroker.core.errors import QueueStreamedError
from sbroker.storage.postgres.connection import BACKEND, PgConnection
from sbroker.storage.postgres.connector import Connector
from sbroker.storage.postgres.session import ListenFeed

T = TypeVar("T")
Row = tuple[Any, ...]

STREAMED = -1
"""The status of the one row sb_take returns on a queue a live Spark stream reads."""


class Writes(Protocol):
    """Short write transactions on a pooled connection (``PgCommitPath``)."""

    def run(self, fn: Callable[[PgConnection], T], *, durable: bool = True) -> T: ...


class StoreParts(Protocol):
    """What a transaction's storage uses of its store (``PgStore`` satisfies it)."""

    connector: Connector
    feed: ListenFeed

    @property
    def commit_path(self) -> Writes: ...

    def reap(self, own: int, *, force: bool = False) -> int: ...


class PgTxStorage:
    """Created by :meth:`PgStore.tx_storage` for one broker transaction."""

    def __init__(self, store: StoreParts, session: int) -> None:
        self._store = store
        self._session = session
        self._conn: PgConnection | None = None
        self._held = False
        self.locks: dict[str, int] = {}

    # -- connections --------------------------------------------------------------------------
    def reader(self) -> PgConnection:
        if self._conn is None:
            self._conn = self._store.connector.checkout()
        return self._conn

    def _open(self) -> PgConnection:
        """The connection, inside this broker transaction's PostgreSQL transaction."""
        conn = self.reader()
        if not conn.in_transaction:
            conn.begin()
        return conn

    @property
    def held(self) -> bool:
        return self._held

    def hold(self) -> PgConnection:
        conn = self._open()
        self._held = True
        return conn

    # -- locks ----------------------------------------------------------------------------------
    def _refuse_if_streamed(self, conn: PgConnection, queue_id: int) -> bool:
        """QueueStreamedError if a live Spark stream reads the queue; True if no stream
        holds it (any more: its session was found dead and reaped), so look again.  The lock
        functions look at the claim after taking a group's lock, and a stream looks for
        locked groups after committing its claim (streams.py): one of the two sees the
        other."""
        if conn.query_one(conn.sql.stream_holder, (queue_id,)) is None:
            return True
        self._store.reap(self._session, force=True)  # its process may be dead
        row = conn.query_one(conn.sql.stream_holder, (queue_id,))
        if row is not None:
            raise QueueStreamedError(
                f"queue {row[3]!r} is read by a Spark stream (pid {row[1]} on {row[2]}): a "
                "streamed queue has no other reader; stop the stream to RECEIVE from it")
        return True

    def take(self, queue_id: int, group: str | None, handle: str | None, limit: int,
             received: Sequence[int], probing: bool) -> list[Row]:
        conn = self._open()
        sql = conn.sql
        top = None if limit < 0 else limit
        for _ in range(2):  # again once if a stream's dead claim was reaped
            if group is None:
                rows = conn.query_all(sql.receive_take_next,
                                      (queue_id, top, conn.ids(received)))
            elif handle:
                rows = conn.query_all(sql.receive_fetch_handle, (queue_id, group, handle, top))
            else:
                rows = conn.query_all(sql.receive_fetch, (queue_id, group, top))
            if not (rows and rows[0][0] == STREAMED):
                break
            self._refuse_if_streamed(conn, queue_id)
            rows = []
        if rows:
            self.locks[str(rows[0][3])] = queue_id
        elif group is not None and group not in self.locks:
            row = conn.query_one(BACKEND.holds_group, (group,))
            if row and row[0]:
                self.locks[group] = queue_id
        return rows

    def lock_next(self, queue_id: int, received: Sequence[int], probing: bool) -> str | None:
        conn = self._open()
        for attempt in range(2):
            row = conn.query_one(conn.sql.receive_candidate, (queue_id, conn.ids(received)))
            group = None if row is None or row[0] is None else str(row[0])
            if group is not None:
                self.locks[group] = queue_id
                return group
            if attempt or conn.query_one(conn.sql.stream_holder, (queue_id,)) is None:
                return None
            self._refuse_if_streamed(conn, queue_id)
        return None

    def lock(self, queue_id: int, groups: Sequence[str]) -> bool:
        conn = self._open()
        row = conn.query_one(conn.sql.insert_group_lock, (conn.ids(groups),))
        if not (row and row[0]):
            return False
        for group in groups:
            self.locks[group] = queue_id
        if conn.query_one(conn.sql.stream_holder, (queue_id,)) is not None:
            self._refuse_if_streamed(conn, queue_id)  # after the lock, as sb_take looks
        return True

    # -- ending ---------------------------------------------------------------------------------
    def commit(self, apply: Callable[[PgConnection], None], *, received: bool,
               changed: bool = True) -> None:
        conn = self._open()
        try:
            with conn.batched():
                apply(conn)
                conn.commit()
        except BaseException:
            if conn.usable and conn.in_transaction:
                conn.rollback()
            self._held = False
            raise
        self._held = False
        self._store.feed.committed(quiet=not changed)

    def rollback(self, count: Callable[[PgConnection], T] | None) -> T | None:
        """The poison count of the rolled-back RECEIVEs commits first, in a transaction of
        its own, while this one still holds its groups: the next reader of a group can only
        take it after the count, so its commit's reset comes after the count (as on SQLite,
        where both happen in one write).  Should this transaction hold a row the count needs
        (an application statement changed the queue's row), the count waits a second, then
        goes after the rollback."""
        conn = self._conn
        released = bool(self.locks)
        result = None
        counted = count is None
        if count is not None:
            try:
                result = self._store.commit_path.run(_bounded(count))
                counted = True
            except pg_errors.LockNotAvailable:
                pass
        if conn is not None and conn.usable and conn.in_transaction:
            conn.rollback()
        self._held = False
        if not counted:
            assert count is not None
            result = self._store.commit_path.run(count)
        elif released:
            self._store.feed.committed(quiet=True)  # the groups are free: others look again
        return result

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._store.connector.release(conn)
        self._held = False
        self.locks = {}


def _bounded(fn: Callable[[PgConnection], T]) -> Callable[[PgConnection], T]:
    """``fn`` in a transaction that waits at most a second for a row lock."""
    def run(conn: PgConnection) -> T:
        conn.execute("SET LOCAL lock_timeout = '1s'")
        return fn(conn)

    return run
