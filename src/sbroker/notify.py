"""Wake-ups for waiting RECEIVEs: a version counter bumped on every local commit that makes
work visible, and by a poller that watches ``PRAGMA data_version`` for other processes."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable

from .clock import Clock, SystemClock

POLL_SECONDS = 0.001  # how often the poller looks for commits by other processes
RECHECK_SECONDS = 0.5  # waiters re-check even without news (dead lock holders, clock)


class Notifier:
    """A condition with a version: waiters sleep until the version moves or a deadline."""

    def __init__(self, clock: Clock, connect: Callable[[], sqlite3.Connection]) -> None:
        self.clock = clock
        self.cond = threading.Condition()
        self.version = 0
        self._connect = connect
        self._waiters = 0
        self._poller: threading.Thread | None = None
        self._closed = False

    def bump(self) -> None:
        with self.cond:
            self.version += 1
            self.cond.notify_all()

    def wait(self, seen: int, deadline: float | None) -> None:
        """Return when the version differs from ``seen``, at ``deadline``, or after a while."""
        with self.cond:
            if self.version != seen or self._closed:
                return
            self._waiters += 1
            self._ensure_poller()
            try:
                if isinstance(self.clock, SystemClock):
                    limit = RECHECK_SECONDS
                    if deadline is not None:
                        limit = min(limit, max(0.0, deadline - self.clock.now()))
                    if limit > 0:
                        self.cond.wait(limit)
                else:
                    self.clock.wait(self.cond, deadline)
            finally:
                self._waiters -= 1

    def _ensure_poller(self) -> None:
        if self._poller is None or not self._poller.is_alive():
            self._poller = threading.Thread(
                target=self._poll, name="sbroker-notifier", daemon=True
            )
            self._poller.start()

    def _poll(self) -> None:
        conn = self._connect()
        try:
            last = conn.execute("PRAGMA data_version").fetchone()[0]
            stop = threading.Event()
            while True:
                with self.cond:
                    if self._closed or self._waiters == 0:
                        self._poller = None
                        return
                stop.wait(POLL_SECONDS)
                current = conn.execute("PRAGMA data_version").fetchone()[0]
                if current != last:
                    last = current
                    self.bump()
        except sqlite3.Error:
            with self.cond:
                self._poller = None
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def close(self) -> None:
        with self.cond:
            self._closed = True
            self.cond.notify_all()
