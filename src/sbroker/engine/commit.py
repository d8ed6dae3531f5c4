"""COMMIT's work inside the store's write transaction: apply the recorded operations in
order (SENDs through the dialog layer's fast path, the rest one by one)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sbroker.core.errors import CommitConflictError, ContractViolationError
from sbroker.engine import catalog, dialogs
from sbroker.engine.endpoints import Context, Endpoint, insert_endpoint, load_endpoint
from sbroker.engine.ops import Begin, End, Move, Op, Send, Timer

if TYPE_CHECKING:
    from sbroker.engine.engine import Engine


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


def apply_ops(engine: Engine, ctx: Context, ops: list[Op], eps: dict[str, Endpoint],
              sent: dict[str, int]) -> None:
    """Apply ``ops`` on ``ctx.conn`` (inside the commit's write transaction)."""
    conn = ctx.conn
    if len(ops) == 1 and type(ops[0]) is Send and dialogs.send_direct(ctx, ops[0], eps):
        return  # one SEND straight into a conversing local peer's queue (checked in SQL)
    if ops and catalog.current_version(conn) != ctx.catalog.version:
        # DDL since the statements ran: check the sends against what is true now (a commit
        # that only receives uses no catalog).
        ctx.catalog = engine.catalogs.get(conn)
        _recheck_sends(ctx, ops, eps)
    if sent:
        dialogs.prefetch_senders(ctx, sent)
    send = dialogs.send_user_message
    for op in ops:
        if type(op) is Send:  # the common case first, unpacked as the tuple it is
            handles, mtype, body = op
            for handle in handles:
                send(ctx, handle, mtype, body)
            continue
        dialogs.flush(ctx)  # SENDs numbered in memory are written before anything else
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
