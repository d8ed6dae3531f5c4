"""The subscribers of a change feed (both backends' ``ChangeFeed.subscribe``): callbacks told
that another process committed, each at most every ``min_interval`` seconds (a change inside
the interval is told at its end, when the feed looks again)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from sbroker.core.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("sbroker.storage")


class Subscribers:
    """Thread-safe; callbacks run in the thread that calls :meth:`tell`."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        # [callback, least seconds between two calls, when last called, a change not told]
        self._entries: list[list[Any]] = []

    def subscribe(self, on_change: Callable[[], None], *, min_interval: float = 0.0) -> None:
        with self._lock:
            self._entries.append([on_change, min_interval, float("-inf"), False])

    def tell(self, changed: bool = True) -> None:
        """Call the subscribers (``changed``: a new change; else only those owed one)."""
        now = self._clock.monotonic()
        due = []
        with self._lock:
            for entry in self._entries:
                entry[3] = entry[3] or changed
                if entry[3] and now - entry[2] >= entry[1]:
                    entry[2], entry[3] = now, False
                    due.append(entry[0])
        for fn in due:
            try:
                fn()
            except Exception:  # a subscriber's failure must not stop the feed
                log.exception("change feed subscriber failed")
