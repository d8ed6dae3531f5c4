"""COMMIT's work inside the store's write transaction: apply the recorded operations in
order (SENDs through the dialog layer's fast path, the rest one by one)."""

from __future__ import annotations

from dataclasses import replace

from sbroker.core.errors import CommitConflictError, ContractViolationError
from sbroker.engine import catalog, dialogs
from sbroker.engine.catalog import CatalogCache
from sbroker.engine.endpoints import Context, Endpoint, insert_endpoint, load_endpoint
from sbroker.engine.ops import Begin, End, Move, Op, Send, Timer


def senders(ops: list[Op], eps: dict[str, Endpoint]) -> dict[str, int]:
    """The conversations a transaction that only SENDs sends on, each once, with their rowid
    as the transaction saw it (else {}): COMMIT reads their rows in one statement."""
    seen: dict[str, int] = {}
    for op in ops:
        if not isinstance(op, Send):
            return {}
        for handle in op.handles:
            if handle not in seen:
                seen[handle] = eps[handle].conv_order or 0
    return seen


def conversations(ops: list[Op], eps: dict[str, Endpoint]) -> list[str]:
    """The existing conversations ``ops`` change, sorted (BEGIN DIALOG makes a new one)."""
    out: set[str] = set()
    for op in ops:
        if isinstance(op, Send):
            out.update(eps[h].conversation_id for h in op.handles)
        elif not isinstance(op, Begin):
            out.add(eps[op.handle].conversation_id)
    return sorted(out)


def apply_ops(catalogs: CatalogCache, ctx: Context, ops: list[Op], eps: dict[str, Endpoint],
              sent: dict[str, int]) -> None:
    """Apply ``ops`` on ``ctx.conn`` (inside the commit's write transaction).

    First the conversations they change are locked (``lock_conversations``): on PostgreSQL
    commits of many hosts run at once, and two must not read and write one conversation's
    sequence numbers and state at the same time; SQLite's single writer makes that a no-op.
    Every read below comes after the lock, so it sees what the previous holder committed.
    The catalog version comes with the lock: DDL since the statements ran rechecks them."""
    conn = ctx.conn
    if len(ops) == 1 and type(ops[0]) is Send and len(ops[0].handles) == 1 \
            and ops[0].trace is None:  # a traced SEND stores its context the ordinary way
        if (conn.serial_writer or ctx.alone) and dialogs.send_direct(ctx, ops[0], eps):
            # One SEND straight into a conversing local peer's queue, checked in SQL (the
            # catalog version included), in one statement that also locks the conversation
            # where commits run at once (PostgreSQL).
            return
    elif ctx.alone and sent and not conn.serial_writer \
            and dialogs.send_direct_many(ctx, ops, eps):
        # Many SENDs the same way, in one statement (a single writer numbers them in memory
        # below instead, with no conversation to lock).
        return
    changed = conversations(ops, eps)
    # The lock's row is the catalog version, read after the senders' prefetch was sent: on
    # PostgreSQL the lock, the prefetch and BEGIN go in one round trip.
    lock = conn.execute(conn.sql.lock_conversations, (conn.ids(changed),)) if changed else None
    if sent:
        dialogs.prefetch_senders(ctx, sent)
    if lock is not None:
        row = lock.fetchone()
        assert row is not None
        version = str(row[0])
    else:
        version = catalog.current_version(conn) if ops else ctx.catalog.version
    if version != ctx.catalog.version:
        # DDL since the statements ran: check the sends against what is true now (a commit
        # that only receives uses no catalog), and prefetch for that catalog.
        ctx.catalog = catalogs.get(conn)
        _recheck_sends(ctx, ops, eps)
        if sent:
            dialogs.prefetch_senders(ctx, sent)
    send = dialogs.send_user_message
    for op in ops:
        if type(op) is Send:  # the common case first, unpacked as the tuple it is
            handles, mtype, body, ctx.trace = op
            for handle in handles:
                send(ctx, handle, mtype, body)
            continue
        dialogs.flush(ctx)  # SENDs numbered in memory are written before anything else
        ctx.trace = None
        match op:
            case Begin(endpoint):
                insert_endpoint(ctx, replace(endpoint))
            case End(handle, error, description, cleanup):
                dialogs.end(ctx, _current(ctx, handle), error, description, cleanup)
            case Timer(handle, at):
                _current(ctx, handle)
                conn.execute(conn.sql.set_timer, (at, handle))
            case Move(handle, group):
                ep = _current(ctx, handle)
                conn.execute(conn.sql.move_endpoint, (group, handle))
                conn.execute(conn.sql.move_messages, (group, ep.group_id, handle))
    dialogs.flush(ctx)


def _recheck_sends(ctx: Context, ops: list[Op], eps: dict[str, Endpoint]) -> None:
    for op in ops:
        if isinstance(op, Send):
            for handle in op.handles:
                contract = eps[handle].contract
                if op.message_type not in ctx.catalog.contracts.get(contract, {}):
                    raise ContractViolationError(
                        f"message type {op.message_type!r} is no longer part of contract "
                        f"{contract!r}", 8431,
                    )


def _current(ctx: Context, handle: str) -> Endpoint:
    ep = load_endpoint(ctx.conn, handle)
    if ep is None:
        raise CommitConflictError(
            f"the conversation {handle} was ended and removed before COMMIT", 8426
        )
    return ep
