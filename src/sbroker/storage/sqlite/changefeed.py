"""How a process notices commits made by other connections to its SQLite file: a poller
watching ``PRAGMA data_version`` (it changes when another connection commits), running while
anybody watches, and kept (thread and connection, not looking) for a while after."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator

from sbroker.core import threads
from sbroker.core.clock import SYSTEM_CLOCK, Clock
from sbroker.storage.subscribers import Subscribers

log = logging.getLogger("sbroker.storage")

POLL_SECONDS = 0.001
"""How often the poller looks, right after it saw a change..."""
POLL_MAX_SECONDS = 0.016
"""... doubling up to this while nothing changes, so a quiet watched database costs little CPU;
the first commit after a quiet spell is noticed within POLL_MAX_SECONDS, later ones within
POLL_SECONDS."""
LINGER_SECONDS = 1.0
"""How long the poller's thread and connection stay once the last watcher left, looking every
POLL_MAX_SECONDS and telling nobody: a RECEIVE that waits again soon (one after each message,
as a reader of a quiet queue does) pays no new thread and connection and
no wake-up of its own, and is served within POLL_MAX_SECONDS as after any quiet spell."""


class DataVersionFeed:
    """The SQLite :class:`~sbroker.storage.ports.ChangeFeed`.  Its poller thread is its own:
    started when the first watcher comes, ended once nobody watched for ``LINGER_SECONDS``,
    joined by :meth:`close`."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], *,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._connect = connect
        self._lock = threading.Lock()
        self._subscribers = Subscribers(clock)
        self._watchers = 0
        self.noticed = 0  # data_version changes seen, told or not
        self._worker: threading.Thread | None = None
        self._closed = False
        self._wake = threading.Event()  # cuts the poller's pause short (close)
        self.pause: Callable[[float], object] = self._wake.wait  # tests may slow it down
        self.now: Callable[[], float] = clock.monotonic  # and move its clock

    def subscribe(self, on_change: Callable[[], None], *, min_interval: float = 0.0) -> None:
        """Call ``on_change`` after other connections commit, at most every
        ``min_interval`` seconds (a change within the interval is told at its end)."""
        self._subscribers.subscribe(on_change, min_interval=min_interval)

    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        with self._lock:
            if self._worker is None and not self._closed:
                self._worker = threading.Thread(target=self._poll, name="sbroker-changefeed",
                                                daemon=True)
                self._worker.start()
            self._watchers += 1  # after a start Ctrl-C may cut short: no watcher left behind
        try:
            yield
        finally:
            with self._lock:
                self._watchers -= 1

    def _changed(self, changed: bool = True) -> None:
        """Tell the subscribers (``changed``: a new change; else only those owed one)."""
        self._subscribers.tell(changed)

    def _poll(self) -> None:
        try:
            conn = self._connect()
        except Exception:
            log.debug("change feed could not connect", exc_info=True)
            with self._lock:
                self._worker = None
            return
        try:
            last = conn.execute("PRAGMA data_version").fetchone()[0]
            interval = POLL_SECONDS
            unwatched: float | None = None  # since when nobody watches
            while True:
                with self._lock:
                    if self._closed:
                        self._worker = None
                        return
                    watched = self._watchers > 0
                    if not watched and unwatched is not None and (
                            self.now() - unwatched >= LINGER_SECONDS):
                        self._worker = None
                        return
                if watched:
                    unwatched = None
                else:
                    if unwatched is None:
                        unwatched = self.now()
                    interval = POLL_MAX_SECONDS
                self.pause(interval)
                current = conn.execute("PRAGMA data_version").fetchone()[0]
                if current != last:
                    self.noticed += 1
                # Whoever watches now: a RECEIVE that began waiting during the pause already
                # looked at its queue, and may wait for exactly this change.
                with self._lock:
                    watched = self._watchers > 0
                if current != last and watched:
                    last = current
                    interval = POLL_SECONDS
                    self._changed()
                else:
                    # Unwatched, a change is only noted: whoever waits next looks at the
                    # queue itself before waiting.
                    last = current
                    interval = min(2 * interval, POLL_MAX_SECONDS)
                    if watched:
                        self._changed(False)
        except sqlite3.Error:
            with self._lock:
                self._worker = None
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            thread = self._worker
        self._wake.set()
        threads.join(thread, 10)
