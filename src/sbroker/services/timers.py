"""Conversation timers, lifetimes, and the anti-replay clean-up of closed endpoints."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from sbroker.engine import dialogs
from sbroker.services.loop import ClockLoop

if TYPE_CHECKING:
    from sbroker.broker import Broker



class TimerService(ClockLoop):
    """Fires DialogTimer messages and lifetime errors when they fall due."""

    # Look again at least this often: another process may set timers (a pass that fires
    # nothing writes nothing, so other processes' readers are not woken by it).
    idle_recheck = 1.0

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker.clock, "sbroker-timers")
        self.broker = broker

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
