"""Reaping dead sessions (both backends' ``Store.reap``): at most every ``interval`` seconds
unless forced, look for sessions whose process died, drop their rows, and tell the change
feed's subscribers (what the dead held is free: waiters look again)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from sbroker.core.clock import SYSTEM_CLOCK, Clock
from sbroker.storage.ports import Liveness

REAP_INTERVAL = 1.0  # seconds between two looks for dead sessions (unless forced)


class Reaper:
    def __init__(self, liveness: Liveness, drop: Callable[[Sequence[int]], None],
                 tell: Callable[[], None], *, interval: float | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._liveness = liveness
        self._drop = drop
        self._tell = tell
        self._interval = interval
        self._last = 0.0
        self._lock = threading.Lock()

    def reap(self, own: int, *, force: bool = False,
             drop: Callable[[Sequence[int]], None] | None = None) -> int:
        """Drop the rows of sessions found dead (with ``drop`` if given: inside a transaction
        the caller holds); how many."""
        interval = REAP_INTERVAL if self._interval is None else self._interval
        with self._lock:
            now = self._clock.monotonic()
            if not force and now - self._last < interval:
                return 0
            self._last = now
        dead = self._liveness.dead(own)
        if not dead:
            return 0
        (drop or self._drop)(dead)
        self._tell()
        return len(dead)
