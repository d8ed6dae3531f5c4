"""Conversation timers, lifetimes, and the anti-replay clean-up of closed endpoints."""

from __future__ import annotations

from sbroker.engine import due
from sbroker.engine.api import EngineAPI
from sbroker.engine.endpoints import Context
from sbroker.services.loop import ClockLoop
from sbroker.storage.ports import Connection


class TimerService(ClockLoop):
    """Fires DialogTimer messages and lifetime errors when they fall due."""

    # Look again at least this often: another process may set timers (a pass that fires
    # nothing writes nothing, so other processes' readers are not woken by it).
    idle_recheck = 1.0

    def __init__(self, engine: EngineAPI) -> None:
        super().__init__(engine.clock, "sbroker-timers")
        self.engine = engine

    def run_once(self) -> float | None:
        """Fire everything due now; the next deadline (or None)."""
        engine = self.engine

        def fire(conn: Connection) -> tuple[Context, float | None]:
            ctx = engine.context(conn)
            return ctx, due.fire_due(ctx)

        ctx, deadline = engine.store.commit_path.run(fire)
        engine.forget_endpoints(ctx.changed)
        engine.after_commit(ctx.ready_queues, False, False, transmitted=ctx.tq_changed)
        return deadline
