"""Conversation timers, lifetimes, and the anti-replay clean-up of closed endpoints."""

from __future__ import annotations

import logging
import sqlite3
import threading
from typing import TYPE_CHECKING

from .. import dialogs

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger("sbroker.timers")
# Look again at least this often: another process may set timers (a pass that fires nothing
# writes nothing, so other processes' readers are not woken by it).
IDLE_RECHECK = 1.0


class TimerService:
    """Fires DialogTimer messages and lifetime errors when they fall due."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.cond = threading.Condition()
        self._woken = False
        self._stopping = False
        self._thread: threading.Thread | None = None

    def run_once(self) -> float | None:
        """Fire everything due now; the next deadline (or None)."""
        b = self.broker

        def fire(conn: sqlite3.Connection) -> tuple[dialogs.Context, float | None]:
            ctx = dialogs.Context(conn, b._catalog_for(conn), b.clock.now(), b.anti_replay)
            return ctx, dialogs.fire_due(ctx)

        ctx, deadline = b.db.writer.run(fire)
        b._forget_endpoints(ctx.changed)
        b._after_commit(ctx.ready_queues, False, set(), False)
        return deadline

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="sbroker-timers", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        with self.cond:
            self._woken = True
            self.cond.notify_all()

    def stop(self) -> None:
        thread = self._thread
        if thread is None:
            return
        with self.cond:
            self._stopping = True
            self.cond.notify_all()
        thread.join()
        self._thread = None

    def _loop(self) -> None:
        clock = self.broker.clock
        while True:
            try:
                deadline = self.run_once()
            except Exception:  # a failing pass must not kill the service
                log.exception("timer pass failed")
                deadline = None
            with self.cond:
                if self._stopping:
                    return
                if self._woken:
                    self._woken = False
                    continue
                limit = clock.now() + IDLE_RECHECK
                clock.wait(self.cond, limit if deadline is None else min(deadline, limit))
                self._woken = False
                if self._stopping:
                    return
