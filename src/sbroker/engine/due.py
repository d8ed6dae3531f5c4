"""Work that falls due by time, at commit: conversation timers, lifetimes, the end of the
anti-replay window; and messages that waited in the transmission queue for a local service
that can now take them."""

from __future__ import annotations

from sbroker.core import messages as m
from sbroker.core.conversation import Effect, Event, State, transition
from sbroker.engine.dialogs import close, deliver_local, drop_pending, flush, next_inbound
from sbroker.engine.endpoints import (
    NEVER,
    Context,
    enqueue,
    from_row,
    is_local,
    load_endpoint,
    save_state,
)


def fire_due(ctx: Context) -> float | None:
    """Fire conversation timers and lifetimes due by ``ctx.now``; the next deadline."""
    conn = ctx.conn
    sql = conn.sql
    for ep in [from_row(r) for r in conn.query_all(sql.due_timers, (ctx.now,))]:
        assert ep is not None
        conn.execute(sql.clear_timer, (ep.handle,))
        if ep.state != State.CD.value:
            enqueue(ctx, ep, -1, m.DIALOG_TIMER, b"", m.new_id(), is_timer=True)
    for ep in [from_row(r) for r in conn.query_all(sql.due_lifetimes, (ctx.now,))]:
        assert ep is not None
        current = load_endpoint(conn, ep.handle)
        if current is None:
            continue  # deleted by its peer's close earlier in this loop
        state, effects = transition(current.state, Event.LIFETIME_EXPIRED)
        current.state = state.value
        save_state(ctx, current)
        conn.execute(sql.set_lifetime, (NEVER, ep.handle))
        if Effect.ENQUEUE_LIFETIME_ERROR in effects:
            drop_pending(ctx, current)
            enqueue(ctx, current, next_inbound(ctx, current), m.ERROR, m.error_body(
                m.LIFETIME_EXPIRED, "The conversation lifetime has expired."), m.new_id())
        if Effect.CLOSE in effects:
            close(ctx, current)
    conn.execute(sql.delete_expired_endpoints, (ctx.now,))
    row = conn.query_one(sql.next_deadline)
    assert row is not None
    return None if row[0] is None or row[0] >= NEVER else float(row[0])

def redeliver_waiting(ctx: Context) -> int:
    """Move messages waiting in the transmission queue for local services into their queues,
    in order per conversation; how many were delivered."""
    delivered = 0
    blocked: set[str] = set()
    sql = ctx.conn.sql
    rows = ctx.conn.query_all(sql.waiting_transmissions)
    for tq_id, handle, msn, mtype, body, message_id, trace in rows:
        if handle in blocked:
            continue
        ep = load_endpoint(ctx.conn, handle)
        if ep is None:
            ctx.conn.execute(sql.delete_transmission, (tq_id,))
            continue
        if not is_local(ctx, ep):
            blocked.add(handle)
            continue
        status = deliver_local(ctx, ep, msn, mtype, body, message_id, trace=trace)
        if status is None:
            ctx.conn.execute(sql.delete_transmission, (tq_id,))
            delivered += 1
        else:
            ctx.conn.execute(sql.set_transmission_status, (status, tq_id))
            blocked.add(handle)
    flush(ctx)
    return delivered
