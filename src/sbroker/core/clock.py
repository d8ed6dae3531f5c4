"""Time as a parameter: the system clock, and a fake clock that tests advance by hand."""

from __future__ import annotations

import threading
import time
import weakref
from typing import Protocol


class Clock(Protocol):
    """What the broker needs of time: read it, and wait on a condition until a deadline."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for intervals and rate limits)."""
        ...

    def wait(self, cond: threading.Condition, deadline: float | None) -> None:
        """Wait on ``cond`` (held by the caller) until notified or ``deadline`` passes."""
        ...

    def sleep(self, seconds: float) -> None:
        """Pause the calling thread for ``seconds`` of this clock's time."""
        ...


class SystemClock:
    """Wall-clock time; waits are real."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, cond: threading.Condition, deadline: float | None) -> None:
        if deadline is None:
            cond.wait()
            return
        remaining = deadline - time.time()
        if remaining > 0:
            cond.wait(remaining)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class FakeClock:
    """A clock that moves only when :meth:`advance` is called; waiters wake when it does."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self._conds: weakref.WeakSet[threading.Condition] = weakref.WeakSet()

    def now(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        """Moves with :meth:`advance`, like :meth:`now`."""
        with self._lock:
            return self._now

    def wait(self, cond: threading.Condition, deadline: float | None) -> None:
        with self._lock:
            self._conds.add(cond)
            if deadline is not None and self._now >= deadline:
                return
        cond.wait()

    def sleep(self, seconds: float) -> None:
        """Return once :meth:`advance` has moved time ``seconds`` on (at once for none)."""
        cond = threading.Condition()
        with cond:
            deadline = self.now() + seconds
            while self.now() < deadline:
                self.wait(cond, deadline)

    def advance(self, seconds: float) -> None:
        """Move time forward and wake everything waiting on this clock."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        with self._lock:
            self._now += seconds
            conds = list(self._conds)
        for cond in conds:
            with cond:
                cond.notify_all()


SYSTEM_CLOCK = SystemClock()
