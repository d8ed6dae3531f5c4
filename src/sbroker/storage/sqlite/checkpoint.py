"""Checkpoints off the commit path.

SQLite's automatic checkpoint runs inside the COMMIT that takes the WAL past
``wal_autocheckpoint`` pages: that COMMIT copies the WAL into the database file and fsyncs it
while the group-commit writer, and every transaction queued behind it, waits (what that cost:
docs/queue-storage.md). Here a thread with its own connection runs PASSIVE checkpoints instead,
nudged by the commits themselves: the copying and the fsync overlap with the next commits.
Every connection keeps an automatic checkpoint at ``SAFETY_PAGES`` as a safety net, for when
this thread falls behind or another process writes without one. Durability does not change: a
commit is durable in the WAL (per the ``synchronous`` level) before any checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable

from sbroker.core import threads

log = logging.getLogger("sbroker.checkpoint")

SAFETY_PAGES = 10_000
"""``wal_autocheckpoint`` of every connection: inline checkpoints only past ~40 MB of WAL."""
MIN_INTERVAL = 0.1
"""Seconds between two checkpoints at the most (each one may fsync the database file)."""
IDLE_EXIT = 2.0
"""The thread ends after this long without a commit, and starts again with the next one."""


class Checkpointer:
    """Runs ``PRAGMA wal_checkpoint(PASSIVE)`` in a thread of its own after commits."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], *,
                 min_interval: float = MIN_INTERVAL, idle_exit: float = IDLE_EXIT) -> None:
        self._connect = connect
        self._min_interval = min_interval
        self._idle_exit = idle_exit
        self._cond = threading.Condition(threading.Lock())
        self._pending = 0  # commits not covered by a checkpoint that started after them
        self._worker: threading.Thread | None = None
        self._closing = False
        self._running = False  # a checkpoint is under way
        self._stop = threading.Event()  # cuts the pause between two checkpoints short
        self.runs = 0
        self.last: tuple[int, int, int] | None = None  # (busy, WAL frames, checkpointed)

    def committed(self) -> None:
        """A commit added to the WAL: checkpoint soon.  Cheap, called on every commit."""
        with self._cond:
            self._pending += 1
            if self._closing:
                return
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="sbroker-checkpointer",
                                                daemon=True)
                self._worker.start()
            elif self._pending == 1:
                self._cond.notify()

    def wait_checkpointed(self, timeout: float) -> bool:
        """Wait until every commit reported so far is covered by a finished checkpoint."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending == 0 and not self._running,
                                       timeout)

    def _run(self) -> None:
        try:
            conn = self._connect()
        except Exception:  # the database is closing or gone: the safety net remains
            log.debug("checkpointer could not connect", exc_info=True)
            with self._cond:
                self._worker = None
                self._cond.notify_all()
            return
        try:
            while True:
                with self._cond:
                    while not self._pending and not self._closing:
                        if not self._cond.wait(self._idle_exit) and not self._pending:
                            self._worker = None
                            return
                    if self._closing:
                        self._worker = None
                        return
                    self._pending = 0
                    self._running = True
                try:
                    row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    self.last = (int(row[0]), int(row[1]), int(row[2]))
                    self.runs += 1
                except sqlite3.Error:  # busy or closing: the next commit asks again
                    log.debug("checkpoint failed", exc_info=True)
                finally:
                    with self._cond:
                        self._running = False
                        self._cond.notify_all()
                self._stop.wait(self._min_interval)
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
            with self._cond:
                self._cond.notify_all()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread (after the checkpoint it is running, if any) and close its
        connection."""
        with self._cond:
            self._closing = True
            thread = self._worker
            self._cond.notify_all()
        self._stop.set()
        threads.join(thread, timeout)
