"""The storage half of a broker transaction on SQLite: conversation group locks and how a
transaction ends (:class:`~sbroker.storage.ports.TxStorage`).

RECEIVE takes a group lock — a row owned by the transaction and its process session — in a
millisecond write through the group-commit writer, so a transaction that holds a group for
minutes never holds the SQLite write lock meanwhile.  The lock is *lazy* (writer.py): it stays
in the writer's memory until the next commit writes it, so a RECEIVE followed by its COMMIT
costs one SQLite commit.  An application write (``tx.execute``) is the exception: it holds the
writer's connection in an open write transaction until the broker transaction ends, so that
it commits or rolls back with the broker effects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from sbroker.core.errors import QueueStreamedError
from sbroker.storage.sqlite.connection import BACKEND, SqliteConnection
from sbroker.storage.sqlite.connector import Connector
from sbroker.storage.sqlite.writer import Writer

T = TypeVar("T")
Row = tuple[Any, ...]


class StoreParts(Protocol):
    """What a transaction's storage uses of its store (``SqliteStore`` satisfies it)."""

    connector: Connector
    writer: Writer

    def reap(self, own: int, *, force: bool = False, within: SqliteConnection | None = None
             ) -> int: ...


class SqliteTxStorage:
    """Created by :meth:`SqliteStore.tx_storage` for one broker transaction."""

    def __init__(self, store: StoreParts, owner: str, session: int, now: Callable[[], float]
                 ) -> None:
        self._store = store
        self._writer = store.writer
        self._owner = owner
        self._session = session
        self._now = now
        self._conn: SqliteConnection | None = None
        self._held = False
        self.locks: dict[str, int] = {}

    # -- connections --------------------------------------------------------------------------
    def reader(self) -> SqliteConnection:
        if self._conn is None:
            self._conn = self._store.connector.acquire()
        return self._conn

    @property
    def held(self) -> bool:
        return self._held

    def _write(self, fn: Callable[[SqliteConnection], T], *, lazy: bool = True) -> T:
        """Lock bookkeeping through the writer, never fsynced (locks die with the process
        anyway); ``lazy``: ``fn`` only takes locks, which may stay in the writer's memory
        until its next commit.  Inside the held transaction if there is one."""
        if self._held:
            return fn(self.reader())
        return self._writer.run(fn, durable=False, lazy=lazy)

    def hold(self) -> SqliteConnection:
        if not self._held:
            conn = self._writer.acquire_exclusive()
            try:
                conn.begin(write=True)
            except BaseException:
                self._writer.release_exclusive()
                raise
            if self._conn is not None:
                self._store.connector.release(self._conn)
            self._conn = conn
            self._held = True
        return self.reader()

    # -- locks ----------------------------------------------------------------------------------
    def _held_by_others(self) -> list[str]:
        """Groups other transactions of this process hold in the writer's memory (call as
        the writer's leader)."""
        return [g for g, e in self._writer._lazy.items() if e[1] != self._owner]

    def _lock(self, conn: SqliteConnection, queue_id: int, group: str, *,
              known_free: bool = False) -> bool:
        """Take the group lock for this transaction; False if another transaction has it."""
        if group in self.locks:
            return True
        writer = self._writer
        if not known_free:
            lazy_owner = writer.lazy_owner(group)
            if lazy_owner is not None and lazy_owner != self._owner:
                return False
            row = conn.execute(conn.sql.group_lock_owner, (group,)).fetchone()
            if row is not None and row[0] != self._owner:
                return False
        values = (group, queue_id, self._owner, self._session, self._now())
        if self._held:
            conn.execute(conn.sql.insert_group_lock, values)
        else:
            writer.lazy_lock(*values)
        self.locks[group] = queue_id
        return True

    def _next_group(self, conn: SqliteConnection, queue_id: int,
                    received: Sequence[int]) -> str | None:
        others = self._held_by_others()
        ids = conn.ids
        params = (queue_id, queue_id, queue_id, self._owner,
                  ids(received) if received else "[]", ids(others) if others else "[]")
        row = conn.execute(conn.sql.receive_candidate, params).fetchone()
        if row is None and self._found_nothing(conn, queue_id):
            row = conn.execute(conn.sql.receive_candidate, params).fetchone()
        return None if row is None else str(row[0])

    def _found_nothing(self, conn: SqliteConnection, queue_id: int) -> bool:
        """Nothing free to take: why?  A stream reads the queue (QueueStreamedError), or a dead
        process holds its groups (True once its locks are dropped: look again)."""
        return self._refuse_if_streamed(conn, queue_id) or self._reap_if_held(conn, queue_id)

    def _refuse_if_streamed(self, conn: SqliteConnection, queue_id: int) -> bool:
        """QueueStreamedError if a live Spark stream reads the queue (inside the write
        transaction that would take a group lock: a stream claims inside one too); True if
        the stream's process was dead, and its claim is gone now."""
        if conn.execute(conn.sql.stream_holder, (queue_id,)).fetchone() is None:
            return False
        self._store.reap(self._session, force=True, within=conn)  # its process may be dead
        row = conn.execute(conn.sql.stream_holder, (queue_id,)).fetchone()
        if row is not None:
            raise QueueStreamedError(
                f"queue {row[3]!r} is read by a Spark stream (pid {row[1]} on {row[2]}): a "
                "streamed queue has no other reader; stop the stream to RECEIVE from it")
        return True

    def _reap_if_held(self, conn: SqliteConnection, queue_id: int) -> bool:
        """If other transactions hold groups of the queue, a dead process may be among them:
        whether one was reaped."""
        if conn.execute(conn.sql.queue_locked_by_others, (queue_id, self._owner)).fetchone():
            return self._store.reap(self._session, within=conn) > 0
        return False

    def _worth_a_write(self, queue_id: int, group: str | None, handle: str | None,
                       probing: bool) -> bool:
        """A read-only look first: only go through the writer when there may be something
        to take, so waiters woken by a commit elsewhere cost no write transaction.  The first
        attempt of a RECEIVE goes straight to the writer (usually there is something)."""
        if self._held or not probing:
            return True
        conn = self.reader()
        if group is None:
            free, locked = conn.execute(
                conn.sql.probe_queue, (queue_id, self._owner, queue_id, self._owner)
            ).fetchone()
            if not free and locked:
                self._store.reap(self._session)  # a dead process may hold them
            return bool(free)
        if handle:
            ready, locked = conn.execute(
                conn.sql.probe_group_handle, (group, handle, group, self._owner)).fetchone()
        else:
            ready, locked = conn.execute(
                conn.sql.probe_group, (group, group, self._owner)).fetchone()
        if ready and locked:
            self._store.reap(self._session)
            return True
        return bool(ready)

    def lock_next(self, queue_id: int, received: Sequence[int], probing: bool) -> str | None:
        def attempt(conn: SqliteConnection) -> str | None:
            group = self._next_group(conn, queue_id, received)
            if group is None or not self._lock(conn, queue_id, group, known_free=True):
                return None
            return group

        if not self._worth_a_write(queue_id, None, None, probing):
            return None
        return self._write(attempt)

    def lock(self, queue_id: int, groups: Sequence[str]) -> bool:
        def attempt(conn: SqliteConnection) -> bool:
            self._refuse_if_streamed(conn, queue_id)
            return all(self._lock(conn, queue_id, g) for g in groups)

        return self._write(attempt)

    def take(self, queue_id: int, group: str | None, handle: str | None, limit: int,
             received: Sequence[int], probing: bool) -> list[Row]:
        def attempt(conn: SqliteConnection) -> list[Row]:
            if group is None:
                others = self._held_by_others()
                if received or others:
                    ids = conn.ids
                    sql = BACKEND.receive_take_excluding
                    params: tuple[Any, ...] = (
                        queue_id, queue_id, self._owner, ids(received) if received else "[]",
                        ids(others) if others else "[]", limit)
                else:
                    sql, params = conn.sql.receive_take_next, (queue_id, queue_id, self._owner,
                                                               limit)
                found = conn.execute(sql, params).fetchall()
                if not found and self._found_nothing(conn, queue_id):
                    found = conn.execute(sql, params).fetchall()
                if found and not self._lock(conn, queue_id, found[0][3], known_free=True):
                    return []
                return found
            self._refuse_if_streamed(conn, queue_id)
            if not self._lock(conn, queue_id, group):
                return []
            if handle:
                return conn.execute(conn.sql.receive_fetch_handle,
                                    (group, handle, limit)).fetchall()
            return conn.execute(conn.sql.receive_fetch, (group, limit)).fetchall()

        if not self._worth_a_write(queue_id, group, handle, probing):
            return []
        return self._write(attempt)

    # -- ending ---------------------------------------------------------------------------------
    def _release_locks(self, conn: SqliteConnection) -> None:
        if self.locks:
            still_lazy = self._writer.lazy_release(self._owner)
            if still_lazy < len(self.locks):  # some were written as rows meanwhile
                if self._held:
                    conn.execute(conn.sql.release_group_locks, (self._owner,))
                else:  # with the batch's COMMIT, together with other transactions' rows
                    self._writer.unlock_rows(self._owner)

    def commit(self, apply: Callable[[SqliteConnection], None], *, received: bool,
               changed: bool = True) -> None:
        def run(conn: SqliteConnection) -> None:
            apply(conn)
            self._release_locks(conn)

        if self._held:
            conn = self.reader()
            try:
                run(conn)
                conn.commit()
                self._writer.committed_exclusive()
            finally:
                if conn.in_transaction:
                    conn.rollback()
                self._writer.released()  # we hold the writer: safe here
                self._drop_hold()
        else:  # with no locks to release, ``apply`` is all there is to run
            self._writer.run(run if self.locks else apply, durable=True)

    def rollback(self, count: Callable[[SqliteConnection], T] | None) -> T | None:
        conn = self._conn
        if conn is not None and conn.in_transaction:
            conn.rollback()
        self._drop_hold()
        if not self.locks and count is None:
            return None

        def undo(c: SqliteConnection) -> T | None:
            self._writer.lazy_release(self._owner)
            c.execute(c.sql.release_group_locks, (self._owner,))
            return None if count is None else count(c)

        return self._writer.run(undo, durable=False)

    def _drop_hold(self) -> None:
        """Give the writer's connection back (after COMMIT or ROLLBACK of a held one)."""
        if self._held:
            conn, self._conn, self._held = self._conn, None, False
            try:
                if conn is not None and conn.in_transaction:
                    conn.rollback()
            finally:
                self._writer.release_exclusive()

    def close(self) -> None:
        self._drop_hold()
        if self._conn is not None:
            self._store.connector.release(self._conn)
            self._conn = None
        self.locks = {}
