"""Group commit: every short write transaction of a broker goes through one queue.

The first thread to arrive becomes the leader, takes everything queued, and runs it in ONE
SQLite transaction on a dedicated connection, each piece inside its own SAVEPOINT so that one
failure rolls back only that piece.  Followers wait and get their result.  Under concurrency
many broker commits share one SQLite commit (and one fsync with ``durability="full"``); alone,
a commit costs two cheap SAVEPOINT statements more than before.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .errors import TransactionStateError

T = TypeVar("T")
MAX_BATCH = 256


class _Item(Generic[T]):
    __slots__ = ("durable", "error", "fn", "result", "state")

    def __init__(self, fn: Callable[[sqlite3.Connection], T], durable: bool) -> None:
        self.fn = fn
        self.durable = durable
        self.result: T | None = None
        self.error: BaseException | None = None
        self.state = 0  # 0 queued, 1 taken by a leader, 2 done


class Writer:
    """Runs write functions in batched SQLite transactions (leader/follower group commit)."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], sync: str) -> None:
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._sync = sync
        self._current_sync = sync
        self._cond = threading.Condition()
        self._queue: list[_Item[Any]] = []
        self._leading = False
        self._holder: int | None = None  # thread holding the writer for a transaction
        self.batches = 0
        self.items = 0

    def _connection(self, durable: bool) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            conn = self._conn = self._connect()
        sync = self._sync if durable else "NORMAL"
        if sync != self._current_sync:
            conn.execute(f"PRAGMA synchronous = {sync}")
            self._current_sync = sync
        return conn

    def acquire_exclusive(self) -> sqlite3.Connection:
        """Hold the writer's connection for one transaction (``execute`` write statements):
        other commits queue here, woken at once on release, instead of sleeping in SQLite's
        busy handler.  The caller must call :meth:`release_exclusive`."""
        me = threading.get_ident()
        with self._cond:
            if self._holder == me:
                raise TransactionStateError(
                    "this thread already holds the write lock in another transaction "
                    "(it ran a write statement with execute): finish that one first"
                )
            while self._leading:
                self._cond.wait()
            self._leading = True
            self._holder = me
        try:
            return self._connection(durable=True)
        except BaseException:
            self.release_exclusive()
            raise

    def release_exclusive(self) -> None:
        with self._cond:
            self._leading = False
            self._holder = None
            self._cond.notify_all()

    def run(self, fn: Callable[[sqlite3.Connection], T], *, durable: bool = True) -> T:
        """Run ``fn(conn)`` inside a write transaction; its result, or its exception."""
        item: _Item[T] = _Item(fn, durable)
        with self._cond:
            if self._holder == threading.get_ident():
                raise TransactionStateError(
                    "another transaction in this thread holds the write lock (it ran a write "
                    "statement with execute): commit or roll it back first"
                )
            self._queue.append(item)
        while True:
            with self._cond:
                while item.state != 2 and self._leading:
                    self._cond.wait()
                if item.state == 2:
                    return self._outcome(item)
                self._leading = True
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                for it in batch:
                    it.state = 1
            try:
                self._commit(batch)
            finally:
                with self._cond:
                    self._leading = False
                    self._cond.notify_all()

    @staticmethod
    def _outcome(item: _Item[T]) -> T:
        if item.error is not None:
            raise item.error
        return item.result  # type: ignore[return-value]

    def _commit(self, batch: list[_Item[Any]]) -> None:
        try:
            conn = self._connection(any(it.durable for it in batch))
            conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            self._finish(batch, exc)
            return
        alone = len(batch) == 1
        for it in batch:
            try:
                if alone:
                    it.result = it.fn(conn)
                else:
                    conn.execute("SAVEPOINT sb_item")
                    try:
                        it.result = it.fn(conn)
                    except BaseException:
                        conn.execute("ROLLBACK TO sb_item")
                        raise
                    finally:
                        conn.execute("RELEASE sb_item")
            except BaseException as exc:  # the item's own failure: only it is undone
                it.error = exc
                if alone:
                    conn.execute("ROLLBACK")
                    self._finish(batch, None)
                    return
        try:
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._finish(batch, exc)
            return
        self.batches += 1
        self.items += len(batch)
        self._finish(batch, None)

    def _finish(self, batch: list[_Item[Any]], error: BaseException | None) -> None:
        with self._cond:
            for it in batch:
                if error is not None and it.error is None:
                    it.error = error
                it.state = 2

    def close(self) -> None:
        with self._cond:
            # Never close the connection under a batch or a transaction of another thread;
            # this thread's own held transaction cannot be running a statement now.
            while self._leading and self._holder != threading.get_ident():
                self._cond.wait()
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
