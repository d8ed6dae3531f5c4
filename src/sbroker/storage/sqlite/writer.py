"""Group commit: every short write transaction of a broker goes through one queue.

The first thread to arrive becomes the leader, takes everything queued, and runs it in ONE
SQLite transaction on a dedicated connection, each piece inside its own SAVEPOINT so that one
failure rolls back only that piece (a lazy piece, below, writes nothing to SQLite and needs
none).  Followers wait and get their result.  Under concurrency many broker commits share
one SQLite commit (and one fsync with ``durability="full"``).
Each follower sleeps on a lock of its own item: the leader wakes exactly the threads whose
items it finished, and hands the lead to the oldest queued one (a Condition's notify_all woke
every follower after every batch: see docs/queue-storage.md for what that cost).

Lazy group locks: a RECEIVE's lock attempt runs as a *lazy* item.  A batch of only lazy items
leaves the SQLite write transaction open instead of committing, and the conversation-group
locks it took stay in memory (:meth:`lazy_lock`).  While the write transaction is open no other
process can take a lock, and in this process every lock goes through the writer, so the memory
table is the truth.  The locks are written as rows by the next batch that commits (they ride
along for free) or, if nothing else commits, after ``LAZY_SECONDS``.  A RECEIVE followed at
once by its COMMIT therefore costs one SQLite commit, not two.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sbroker.core import threads
from sbroker.core.clock import SYSTEM_CLOCK, Clock
from sbroker.core.errors import TransactionStateError
from sbroker.storage.sqlite.connection import BACKEND, SqliteConnection

T = TypeVar("T")
MAX_BATCH = 256
LAZY_SECONDS = 0.004  # the longest an open lazy transaction holds the database write lock

_INSERT_LOCK = (
    "INSERT OR IGNORE INTO sb_group_locks(group_id, queue_id, owner, session_id, acquired_at)"
    " VALUES (?, ?, ?, ?, ?)"
)


def _nothing() -> None:
    return None


def _sleeper() -> threading.Lock:
    """A held lock: a thread sleeps in ``acquire`` until another thread releases it."""
    lock = threading.Lock()
    lock.acquire()
    return lock


class _Item(Generic[T]):
    __slots__ = ("armed", "durable", "error", "fn", "lazy", "result", "state", "wake")

    def __init__(self, fn: Callable[[SqliteConnection], T], durable: bool, lazy: bool) -> None:
        self.fn = fn
        self.durable = durable
        self.lazy = lazy
        self.result: T | None = None
        self.error: BaseException | None = None
        self.state = 0  # 0 queued, 1 taken by a leader, 2 done
        # Its thread sleeps on ``wake`` (held locked; a release lets one acquire through)
        # while ``armed``: woken when the item is done, or when it may lead.
        self.wake: threading.Lock | None = None
        self.armed = False

    def wake_up(self) -> None:
        """Let the item's sleeping thread go (call with the writer's mutex held)."""
        if self.armed:
            self.armed = False
            self.wake.release()  # type: ignore[union-attr]


class Writer:
    """Runs write functions in batched SQLite transactions (leader/follower group commit)."""

    def __init__(self, connect: Callable[[], SqliteConnection], sync: str, *,
                 on_commit: Callable[[], None] | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self._connect = connect
        self._clock = clock  # real time: a lazy transaction holds other processes' writes
        self._on_commit = on_commit or _nothing  # told after every SQLite COMMIT
        self._conn: SqliteConnection | None = None
        self._sync = sync
        self._current_sync = sync
        # One mutex guards the state below.  Threads of ``run`` sleep on their item's own
        # lock (woken one by one: no Condition bookkeeping, no herd); the few others that
        # wait for the leadership (exclusive holders, close) wait on ``_cond``.
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._cond_waiters = 0
        self._holders_waiting: deque[int] = deque()  # threads waiting to hold, in turn
        self._queue: list[_Item[Any]] = []
        self._leading = False
        self._holder: int | None = None  # thread holding the writer for a transaction
        self._open = False  # a lazy write transaction is open on self._conn
        self._opened_at = 0.0
        self._lazy: dict[str, tuple[int, str, int, float]] = {}  # group -> lock row values
        # Groups whose lock was released by a commit still running: observers outside the
        # writer (activation monitors) must see them locked until that COMMIT has landed.
        self._releasing: set[str] = set()
        # Owners whose lock rows (written by an earlier commit) go with the next COMMIT: one
        # DELETE per batch instead of one per committing transaction.
        self._unlock: list[str] = []
        self._closing = False
        self._timer: threading.Thread | None = None
        self._wake = threading.Event()  # set when a lazy transaction opens
        self.batches = 0
        self.items = 0

    # -- lazy locks (called by the leader, inside a running item) ------------------------
    def lazy_lock(self, group: str, queue_id: int, owner: str, session: int, at: float) -> None:
        self._lazy[group] = (queue_id, owner, session, at)

    def lazy_owner(self, group: str) -> str | None:
        entry = self._lazy.get(group)
        return None if entry is None else entry[1]

    def lazy_groups(self) -> list[str]:
        """Groups locked in memory only, or being released by a commit still running (any
        thread may ask; a snapshot)."""
        return [*self._lazy, *self._releasing]

    def lazy_release(self, owner: str) -> int:
        """Forget ``owner``'s locks not written yet; how many there were."""
        mine = [g for g, entry in self._lazy.items() if entry[1] == owner]
        for group in mine:
            del self._lazy[group]
        self._releasing.update(mine)
        return len(mine)

    def unlock_rows(self, owner: str) -> None:
        """Delete ``owner``'s lock rows with this batch's COMMIT (call inside an item)."""
        self._unlock.append(owner)

    def released(self) -> None:
        """The commit that released locks has ended (committed or not)."""
        self._releasing.clear()

    def _materialize(self, conn: SqliteConnection) -> None:
        """Delete the lock rows released by this batch's items, and write the lazy locks as
        rows (cleared from memory only once COMMIT succeeded)."""
        if self._unlock:
            owners, self._unlock = self._unlock, []
            conn.execute(BACKEND.release_group_locks_of, (json.dumps(owners),))
        if self._lazy:
            conn.executemany(_INSERT_LOCK, [
                (g, q, owner, session, at) for g, (q, owner, session, at) in self._lazy.items()
            ])

    # -- connection ------------------------------------------------------------------------
    def _connection(self, durable: bool) -> SqliteConnection:
        conn = self._conn
        if conn is None:
            conn = self._conn = self._connect()
        if not self._open:  # the safety level cannot change inside a transaction
            sync = self._sync if durable else "NORMAL"
            if sync != self._current_sync:
                conn.execute(f"PRAGMA synchronous = {sync}")
                self._current_sync = sync
        return conn

    def _protect_lazy(self, conn: SqliteConnection) -> None:
        """After a ROLLBACK, in-memory locks are no longer covered by the write lock: write
        them now."""
        if self._lazy:
            conn.execute("BEGIN IMMEDIATE")
            self._open = True
            self._commit_open(conn)

    def _commit_open(self, conn: SqliteConnection) -> None:
        """Commit the open lazy transaction (writing its locks), if there is one."""
        if self._open:
            try:
                self._materialize(conn)
                conn.execute("COMMIT")
                self._lazy.clear()
            finally:
                self._releasing.clear()
                self._open = False
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            self._on_commit()

    def acquire_exclusive(self) -> SqliteConnection:
        """Hold the writer's connection for one transaction (``execute`` write statements):
        other commits queue here, woken at once on release, instead of sleeping in SQLite's
        busy handler.  The caller must call :meth:`release_exclusive`.

        Holders take turns in the order they asked (a thread coming back for the writer at
        once waits behind one that asked before), and what is queued in :meth:`run` goes
        first, in one batch: an executor's readers serving a backlog back to back starve
        neither each other nor a queued commit."""
        me = threading.get_ident()
        with self._mutex:
            if self._holder == me:
                raise TransactionStateError(
                    "this thread already holds the write lock in another transaction "
                    "(it ran a write statement with execute): finish that one first"
                )
            self._holders_waiting.append(me)
            self._cond_waiters += 1
            try:
                while self._leading or self._holders_waiting[0] != me:
                    self._cond.wait()
            except BaseException:
                self._holders_waiting.remove(me)
                self._cond.notify_all()
                raise
            finally:
                self._cond_waiters -= 1
            self._holders_waiting.popleft()
            self._leading = True
            self._holder = me
            batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            for it in batch:
                it.state = 1
        try:
            if batch:
                self._commit(batch)
            conn = self._connection(durable=True)
            self._commit_open(conn)
            return self._connection(durable=True)
        except BaseException:
            self.release_exclusive()
            raise

    def committed_exclusive(self) -> None:
        """The holder of :meth:`acquire_exclusive` committed on the writer's connection."""
        self._on_commit()

    def release_exclusive(self) -> None:
        with self._mutex:
            self._leading = False
            self._holder = None
            self._hand_off()

    # -- leadership (call with the mutex held) ------------------------------------------------
    def _wait_for_leadership(self) -> None:
        """Wait until no other thread leads (or holds the writer for a transaction)."""
        me = threading.get_ident()
        self._cond_waiters += 1
        try:
            while self._leading and self._holder != me:
                self._cond.wait()
        finally:
            self._cond_waiters -= 1

    def _hand_off(self) -> None:
        """The leadership is free: wake the oldest queued item's thread to take it, and
        whoever waits for it on the condition."""
        if self._queue:
            self._queue[0].wake_up()  # not armed: it is awake already and will look
        if self._cond_waiters:
            self._cond.notify_all()

    # -- batches -----------------------------------------------------------------------------
    def run(self, fn: Callable[[SqliteConnection], T], *, durable: bool = True,
            lazy: bool = False) -> T:
        """Run ``fn(conn)`` inside a write transaction; its result, or its exception.

        ``lazy``: ``fn`` changes nothing but lazy locks (and may leave the transaction open).

        Uncontended (no leader, nothing queued) the caller leads at once with no queue item:
        the same transaction as a batch of one, without the bookkeeping of followers.
        """
        item = self._arrive(fn, durable, lazy)
        if item is not None:
            return self._follow(item)
        try:
            return self._run_alone(fn, durable, lazy)
        finally:
            with self._mutex:
                self._leading = False
                self._hand_off()

    def _arrive(self, fn: Callable[[SqliteConnection], T], durable: bool, lazy: bool
                ) -> _Item[T] | None:
        """Take the lead at once (None) when nobody leads and nothing is queued; else queue
        ``fn`` as an item."""
        with self._mutex:
            if self._holder == threading.get_ident():
                raise TransactionStateError(
                    "another transaction in this thread holds the write lock (it ran a write "
                    "statement with execute): commit or roll it back first"
                )
            if not self._leading and not self._queue:
                self._leading = True
                return None
            item: _Item[T] = _Item(fn, durable, lazy)
            self._queue.append(item)
            return item

    def _follow(self, item: _Item[T]) -> T:
        """Wait until a leader has run ``item``, leading a batch whenever the lead is free."""
        mutex = self._mutex
        while True:
            with mutex:
                if item.state == 2:
                    return self._outcome(item)
                lead = not self._leading
                if lead:
                    self._leading = True
                    batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                    for it in batch:
                        it.state = 1
                else:
                    if item.wake is None:
                        item.wake = _sleeper()
                    wake = item.wake
                    item.armed = True
            if lead:
                try:
                    self._commit(batch)
                finally:
                    with mutex:
                        self._leading = False
                        self._hand_off()
            else:
                self._sleep(item, wake)

    def _sleep(self, item: _Item[Any], wake: threading.Lock) -> None:
        """Sleep until the leader finished ``item`` or handed the lead on."""
        try:
            wake.acquire()
        except BaseException:  # interrupted: never leave the lead to a gone thread
            with self._mutex:
                item.armed = False
                if item.state == 0:
                    self._queue.remove(item)
                if not self._leading:
                    self._hand_off()
            raise

    @staticmethod
    def _outcome(item: _Item[T]) -> T:
        if item.error is not None:
            raise item.error
        return item.result  # type: ignore[return-value]

    def _run_alone(self, fn: Callable[[SqliteConnection], T], durable: bool, lazy: bool) -> T:
        """One item in a transaction of its own (call as the leader): its result, or its
        exception, the transaction rolled back."""
        conn = self._connection(lazy or durable)  # see _commit for the safety level
        if not self._open:
            conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
        except BaseException:
            self._unlock.clear()
            conn.execute("ROLLBACK")
            self._open = False
            self._releasing.clear()
            self._protect_lazy(conn)
            raise
        if lazy and self._lazy:
            self._keep_open()
            return result
        self._commit_batch(conn)
        self.items += 1
        return result

    def _keep_open(self) -> None:
        """Leave the lazy write transaction open (its timer commits it if nobody does)."""
        if not self._open:
            self._open = True
            self._opened_at = self._clock.monotonic()
            self._ensure_timer()
            self._wake.set()

    def _commit_batch(self, conn: SqliteConnection) -> None:
        """Write the lazy locks and COMMIT; on failure roll back (keeping in-memory locks
        protected) and raise."""
        try:
            if self._unlock or self._lazy:
                self._materialize(conn)
            conn.execute("COMMIT")
            self._lazy.clear()
        except BaseException:
            self._unlock.clear()  # their transactions roll back, releasing them again
            self._releasing.clear()
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._open = False
            with contextlib.suppress(sqlite3.Error):
                self._protect_lazy(conn)
            raise
        self._open = False
        self._releasing.clear()
        self.batches += 1
        self._on_commit()

    def _commit(self, batch: list[_Item[Any]]) -> None:
        if len(batch) == 1:
            it = batch[0]
            try:
                it.result = self._run_alone(it.fn, it.durable, it.lazy)
            except BaseException as exc:
                it.error = exc
            self._finish(batch, None)
            return
        lazy = all(it.lazy for it in batch)
        try:
            # A lazy transaction starts at the configured safety level: whatever joins it
            # later may need that level, and the level cannot change inside a transaction.
            conn = self._connection(lazy or any(it.durable for it in batch))
            if not self._open:
                conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            self._finish(batch, exc)
            return
        for it in batch:
            if it.lazy:  # reads and locks in memory only: nothing of it to undo in SQLite
                try:
                    it.result = it.fn(conn)
                except BaseException as exc:
                    it.error = exc
                continue
            unlocked = len(self._unlock)
            try:
                conn.execute("SAVEPOINT sb_item")
                try:
                    it.result = it.fn(conn)
                except BaseException:
                    conn.execute("ROLLBACK TO sb_item")
                    del self._unlock[unlocked:]
                    raise
                finally:
                    conn.execute("RELEASE sb_item")
            except BaseException as exc:  # the item's own failure: only it is undone
                it.error = exc
        if lazy and self._lazy:
            self._keep_open()
            self._finish(batch, None)
            return
        try:
            self._commit_batch(conn)
        except BaseException as exc:
            self._finish(batch, exc)
            return
        self.items += len(batch)
        self._finish(batch, None)

    def _finish(self, batch: list[_Item[Any]], error: BaseException | None) -> None:
        with self._mutex:
            for it in batch:
                if error is not None and it.error is None:
                    it.error = error
                it.state = 2
                it.wake_up()

    # -- the timer that closes a lazy transaction nobody else closed ------------------------
    def _ensure_timer(self) -> None:
        with self._mutex:
            if self._timer is None:
                self._timer = threading.Thread(target=self._close_lazily,
                                               name="sbroker-writer", daemon=True)
                self._timer.start()

    def _close_lazily(self) -> None:
        """Commit a lazy transaction that stayed open LAZY_SECONDS; idle a while, then exit.
        It sleeps on its own (never on the writer's condition), so batches do not wake it."""
        while not self._closing:
            if not self._open:
                self._wake.clear()
                if not self._open and not self._wake.wait(1.0):
                    with self._mutex:
                        if not self._open and not self._wake.is_set():
                            self._timer = None
                            return
                continue
            remaining = self._opened_at + LAZY_SECONDS - self._clock.monotonic()
            if remaining > 0:
                self._clock.sleep(remaining)
                continue
            with self._mutex:
                if self._leading or not self._open:
                    busy = True
                else:
                    busy = False
                    self._leading = True
            if busy:
                self._clock.sleep(LAZY_SECONDS / 4)  # the leader's batch will commit or keep it
                continue
            try:
                conn = self._conn
                if conn is not None:
                    try:
                        self._commit_open(conn)
                    except sqlite3.Error:
                        self._protect_lazy(conn)
            except sqlite3.Error:
                pass  # still failing: the next batch writes the locks with its commit
            finally:
                with self._mutex:
                    self._leading = False
                    self._hand_off()
        with self._mutex:
            self._timer = None

    def close(self) -> None:
        with self._mutex:
            self._closing = True
            self._wake.set()
            # Never close the connection under a batch or a transaction of another thread;
            # this thread's own held transaction cannot be running a statement now.
            self._wait_for_leadership()
            conn, self._conn = self._conn, None
            if conn is not None and self._open:
                # Only lock bookkeeping is open: the transactions that took those locks end
                # with the broker, so the locks are dropped rather than written.
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                self._open = False
                self._lazy.clear()
        if conn is not None:
            conn.close()
        threads.join(self._timer, 10)  # it sees _closing (and the wake) and returns
