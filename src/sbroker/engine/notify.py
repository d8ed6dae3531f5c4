"""Wake-ups for waiting RECEIVEs: a version counter bumped on every local commit that makes
work visible, and by a poller that watches ``PRAGMA data_version`` for other processes."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterable

from sbroker.core.clock import Clock, SystemClock

POLL_SECONDS = 0.001  # how often the poller looks for commits by other processes, when busy
POLL_MAX_SECONDS = 0.016  # ... doubling up to this while nothing changes (a waiting reader
# costs ~0.5 % of a core instead of ~7 %; the first commit after a quiet spell wakes a waiter
# of another process within 16 ms, later ones within 1 ms)
RECHECK_SECONDS = 0.5  # waiters re-check even without news (dead lock holders, clock)


class Notifier:
    """A condition with versions: waiters sleep until the version they watch moves (the
    global one, or one queue's) or a deadline, so a commit into queue A does not send the
    readers of queue B back to the database."""

    def __init__(self, clock: Clock, connect: Callable[[], sqlite3.Connection]) -> None:
        self.clock = clock
        self.cond = threading.Condition(threading.Lock())  # not re-entrant: faster
        self.version = 0
        self._epoch = 0  # bumped when we cannot tell which queues changed
        self._queues: dict[int, int] = {}
        self._connect = connect
        self._waiters = 0
        self._poller: threading.Thread | None = None
        self._closed = False
        self._pause: Callable[[float], object] = threading.Event().wait  # the poller's sleep

    def bump(self, queue_ids: Iterable[int] | None = None) -> None:
        """Something changed: in these queues, or (None) anywhere."""
        with self.cond:
            self.version += 1
            if queue_ids is None:
                self._epoch += 1
            else:
                for q in queue_ids:
                    self._queues[q] = self._queues.get(q, 0) + 1
            self.cond.notify_all()

    def token(self, queue_id: int | None = None) -> object:
        """What to pass to :meth:`wait`: the global version, or one queue's."""
        with self.cond:
            return self._token(queue_id)

    def _token(self, queue_id: int | None) -> object:
        if queue_id is None:
            return self.version
        return (self._epoch, self._queues.get(queue_id, 0))

    def wait(self, seen: object, deadline: float | None, queue_id: int | None = None) -> None:
        """Return when the watched version differs from ``seen``, at ``deadline``, or after
        a while (waiters re-check now and then: dead lock holders, the clock)."""
        with self.cond:
            if self._token(queue_id) != seen or self._closed:
                return
            self._waiters += 1
            self._ensure_poller()
            try:
                if isinstance(self.clock, SystemClock):
                    end = self.clock.now() + RECHECK_SECONDS
                    if deadline is not None:
                        end = min(end, deadline)
                    while self._token(queue_id) == seen and not self._closed:
                        remaining = end - self.clock.now()
                        if remaining <= 0:
                            break
                        self.cond.wait(remaining)
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
            interval = POLL_SECONDS
            while True:
                with self.cond:
                    if self._closed or self._waiters == 0:
                        self._poller = None
                        return
                self._pause(interval)
                current = conn.execute("PRAGMA data_version").fetchone()[0]
                if current != last:
                    last = current
                    interval = POLL_SECONDS
                    self.bump()
                else:
                    interval = min(2 * interval, POLL_MAX_SECONDS)
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
