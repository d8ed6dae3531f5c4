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
from typing import TYPE_CHECKING, Any, TypeVar

from sbroker.storage.sqlite.connection import BACKEND, SqliteConnection

if TYPE_CHECKING:
    from sbroker.storage.sqlite.store import SqliteStore

T = TypeVar("T")
Row = tuple[Any, ...]


class SqliteTxStorage:
    """Created by :meth:`SqliteStore.tx_storage` for one broker transaction."""

    def __init__(self, store: SqliteStore, owner: str, session: int, now: Callable[[], float]
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
        row = conn.execute(conn.sql.receive_candidate, (
            queue_id, queue_id, self._owner, ids(received) if received else "[]",
            ids(others) if others else "[]")).fetchone()
        if row is not None:
            return str(row[0])
        self._reap_if_held(conn, queue_id)
        return None

    def _reap_if_held(self, conn: SqliteConnection, queue_id: int) -> None:
        """Nothing free to take: if other transactions hold groups of the queue, a dead
        process may be among them."""
        if conn.execute(conn.sql.queue_locked_by_others, (queue_id, self._owner)).fetchone():
            self._store.reap(self._session)

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
        return self._write(lambda conn: all(self._lock(conn, queue_id, g) for g in groups))

    def take(self, queue_id: int, group: str | None, handle: str | None, limit: int,
             received: Sequence[int], probing: bool) -> list[Row]:
        def attempt(conn: SqliteConnection) -> list[Row]:
            if group is None:
                others = self._held_by_others()
                if received or others:
                    ids = conn.ids
                    found = conn.execute(BACKEND.receive_take_excluding, (
                        queue_id, self._owner, ids(received) if received else "[]",
                        ids(others) if others else "[]", limit)).fetchall()
                else:
                    found = conn.execute(conn.sql.receive_take_next,
                                         (queue_id, self._owner, limit)).fetchall()
                if not found:
                    self._reap_if_held(conn, queue_id)
                elif not self._lock(conn, queue_id, found[0][3], known_free=True):
                    return []
                return found
            if not self._lock(conn, queue_id, group):
                return []
            target = group
            if handle:
                return conn.execute(conn.sql.receive_fetch_handle,
                                    (target, handle, limit)).fetchall()
            return conn.execute(conn.sql.receive_fetch, (target, limit)).fetchall()

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

    def commit(self, apply: Callable[[SqliteConnection], None], *, received: bool) -> None:
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
        else:
            self._writer.run(run, durable=True)

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
