"""A transaction dropped without COMMIT or ROLLBACK (no ``with``, an exception in user code
that skipped both, a notebook cell re-run) is rolled back when Python collects it, the way
SQL Server rolls back the transaction of a session that goes away.

Without this its conversation-group locks would stay until the broker closes, and a write
statement it ran with ``execute`` would keep the writer's connection, so every later commit
of the process would wait forever.  The roll back runs on the engine's own worker thread:
the collection can happen anywhere, even inside the writer's own batch.
"""

from __future__ import annotations

import logging
import queue
import threading
import weakref
from collections.abc import Iterable
from typing import Any, Protocol

from sbroker.core import threads
from sbroker.storage.ports import Connection, TxStorage

log = logging.getLogger("sbroker.engine")


class Undoer(Protocol):
    """What the undertaker uses of the engine: whether it is closed, and a rollback's
    bookkeeping (``Engine`` satisfies it)."""

    closed: bool

    def count_rollbacks(self, conn: Connection, queue_ids: Iterable[int]) -> list[int]: ...

    def after_rollback(self, received: set[int], released: set[int] | bool,
                       disabled: list[int]) -> None: ...


class Leftovers:
    """What a live transaction holds that must be given back if it is dropped."""

    __slots__ = ("finalizer", "queues", "storage")

    def __init__(self, storage: TxStorage, queues: set[int]) -> None:
        self.storage = storage
        self.queues = queues  # queues it received from (the set the transaction fills)
        self.finalizer: Any = None  # the weakref.finalize watching the transaction

    def done(self) -> None:
        """The transaction ended properly: nothing to do at collection."""
        if self.finalizer is not None:
            self.finalizer.detach()


class Abandoned:
    """The engine's undertaker: rolls back collected transactions on a thread of its own,
    started with the first one and joined by :meth:`close`."""

    def __init__(self, engine: Undoer) -> None:
        self._engine = weakref.ref(engine)
        self._queue: queue.SimpleQueue[Leftovers | None] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._lock = threading.Lock()

    def watch(self, tx: object, storage: TxStorage, queues: set[int]) -> Leftovers:
        """Roll back what ``tx`` holds if it is collected while active."""
        left = Leftovers(storage, queues)
        left.finalizer = weakref.finalize(tx, self._collected, left)
        left.finalizer.atexit = False  # at exit the broker's close drops the session anyway
        return left

    def _collected(self, left: Leftovers) -> None:
        with self._lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, daemon=True,
                                                name="sbroker-abandoned-transactions")
                self._worker.start()
        self._queue.put(left)

    def _run(self) -> None:
        while (left := self._queue.get()) is not None:
            engine = self._engine()
            if engine is None or engine.closed:
                continue
            try:
                _undo(engine, left)
            except Exception:  # the broker may be closing under it
                log.debug("could not roll back an abandoned transaction", exc_info=True)

    def close(self) -> None:
        """Stop the thread (what it has not rolled back yet dies with the session)."""
        with self._lock:
            thread, self._worker = self._worker, None
        if thread is not None:
            self._queue.put(None)
            threads.join(thread, 10)


def _undo(engine: Undoer, left: Leftovers) -> None:
    queues = left.queues
    disabled = left.storage.rollback(lambda conn: engine.count_rollbacks(conn, queues))
    left.storage.close()
    engine.after_rollback(set(queues), True, disabled or [])
