"""A background thread on the injected clock: runs a pass when woken or when its deadline
comes, and lets tests wait (``sync``) for a pass that started after they asked."""

from __future__ import annotations

import logging
import threading

from sbroker.core import threads
from sbroker.core.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("sbroker.services")


class ClockLoop:
    """Subclasses implement :meth:`run_once`, returning the next deadline (or None)."""

    idle_recheck = 60.0  # look again at least this often even without news

    def __init__(self, clock: Clock, name: str) -> None:
        self.clock = clock
        self.name = name
        self.cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._woken = False
        self._requested = 0
        self._completed = 0

    def run_once(self) -> float | None:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        thread = self._thread
        if thread is None:
            return
        with self.cond:
            self._stopping = True
            self.cond.notify_all()
        threads.join(thread)
        self._thread = None

    def wake(self) -> None:
        """Ask for a pass as soon as possible (cheap; callable from any thread)."""
        with self.cond:
            self._woken = True
            self.cond.notify_all()

    def sync(self, timeout: float = 10.0) -> bool:
        """Wait (real time) until a pass that began after this call has finished."""
        end = SYSTEM_CLOCK.monotonic() + timeout  # real time on purpose: a thread's pass
        with self.cond:
            self._requested += 1
            target = self._requested
            self._woken = True
            self.cond.notify_all()
            while self._completed < target:
                remaining = end - SYSTEM_CLOCK.monotonic()
                if remaining <= 0 or self._thread is None:
                    return False
                self.cond.wait(remaining)
        return True

    def _loop(self) -> None:
        while True:
            with self.cond:
                if self._stopping:
                    return
                self._woken = False
                ticket = self._requested
            try:
                deadline = self.run_once()
            except Exception:  # a failing pass must not kill the service
                log.exception("background pass failed", extra={"service": self.name})
                deadline = None
            with self.cond:
                self._completed = max(self._completed, ticket)
                self.cond.notify_all()
                if self._stopping:
                    return
                if self._woken:
                    continue
                limit = self.clock.now() + self.idle_recheck
                self.clock.wait(self.cond, limit if deadline is None else min(deadline, limit))
