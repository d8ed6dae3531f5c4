"""COMMIT's work inside the store's write transaction: SENDs straight into conversing local
peers' queues through the backend's send path, or else the recorded operations in order
(SENDs numbered in memory where they can be, the rest one by one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from sbroker.core.errors import CommitConflictError, ContractViolationError
from sbroker.engine import catalog, dialogs
from sbroker.engine.catalog import CatalogCache
from sbroker.engine.endpoints import Context, Endpoint, Sending, insert_endpoint, load_endpoint
from sbroker.engine.ops import Begin, End, Move, Op, Send, Timer
from sbroker.storage.ports import Direct, SendPath


def senders(ops: list[Op], eps: dict[str, Endpoint]) -> tuple[dict[str, int], int]:
    """The conversations a transaction that only SENDs sends on, each once, with their rowid
    as the transaction saw it (else {}): COMMIT reads their rows in one statement; with how
    many messages they send."""
    seen: dict[str, int] = {}
    count = 0
    for op in ops:
        if type(op) is not Send:
            return {}, 0
        handles = op.handles
        count += len(handles)
        for handle in handles:
            if handle not in seen:
                seen[handle] = eps[handle].conv_order or 0
    return seen, count


def conversations(ops: list[Op], eps: dict[str, Endpoint]) -> list[str]:
    """The existing conversations ``ops`` change, sorted (BEGIN DIALOG makes a new one)."""
    out: set[str] = set()
    for op in ops:
        if isinstance(op, Send):
            out.update(eps[h].conversation_id for h in op.handles)
        elif not isinstance(op, Begin):
            out.add(eps[op.handle].conversation_id)
    return sorted(out)


class Commit:
    """One broker transaction's COMMIT work, run inside the store's write transaction (and
    once more the ordinary way when a direct SEND whose answer came with COMMIT wrote
    nothing: see :meth:`wrote_nothing`).

    There is one path: SENDs that may go straight into conversing local peers' queues are
    offered to the backend's send path (``storage/ports.py`` SendPath), which takes them or
    not; otherwise the conversations are locked, the catalog checked, and every operation
    applied in order (:func:`apply_ops`)."""

    def __init__(self, catalogs: CatalogCache, path: SendPath, ops: list[Op],
                 eps: dict[str, Endpoint], *, alone: bool) -> None:
        self._catalogs = catalogs
        self._path = path
        self._ops = ops
        self._eps = eps
        self.alone = alone  # the commit does nothing but its SENDs
        self._sent, self._count = senders(ops, eps)
        # Whether an operation sets a timer or begins a dialog (the timer service looks
        # again), and whether one ends or moves a conversation (its snapshot is forgotten).
        self.timers = self.others = False
        if not self._sent:
            for op in ops:
                if isinstance(op, (Timer, Begin)):
                    self.timers = True
                elif isinstance(op, (End, Move)):
                    self.others = True
        self._answer: Callable[[], bool] | None = None
        self._direct: list[Direct] = []

    def apply(self, ctx: Context) -> None:
        """Apply the operations on ``ctx.conn`` (inside the commit's write transaction)."""
        self._answer = None
        if not self._ops:
            return  # a commit of RECEIVEs only: nothing to lock, check or apply
        ctx.sending = Sending(learn=self._path.learn)
        if self._count and self._path.takes(self._count, self.alone) and self._send_direct(ctx):
            return
        lock_and_check(self._catalogs, ctx, self._ops, self._eps, self._sent)
        apply_ops(ctx, self._ops, self._eps)

    def _send_direct(self, ctx: Context) -> bool:
        """The commit's SENDs straight into their peers' queues, in the backend's statement
        (which checks both ends still converse and the catalog is the one checked); False,
        with nothing written, when they go the ordinary way."""
        direct = dialogs.direct_sends(ctx, self._path, self._ops, self._eps)
        if direct is None:
            return False
        verdict = self._path.send(ctx.conn, direct, ctx.now, ctx.catalog.version, self.alone)
        if verdict is False:
            self._forget(direct)
            return False
        if verdict is not True:
            self._answer, self._direct = verdict, direct
        ready = ctx.ready_queues
        for d in direct:
            ready.add(d.peer_queue)
        return True

    def wrote_nothing(self) -> bool:
        """After COMMIT: whether a direct SEND answered with COMMIT wrote nothing (its
        conversation changed since it was last seen).  Then the commit must be made again,
        the ordinary way: its peers are forgotten and it no longer counts as alone."""
        answer, self._answer = self._answer, None
        if answer is None or answer():
            return False
        self._forget(self._direct)
        self.alone = False
        return True

    def _forget(self, direct: list[Direct]) -> None:
        for d in direct:
            self._path.forget(d.handle)


def lock_and_check(catalogs: CatalogCache, ctx: Context, ops: list[Op],
                   eps: dict[str, Endpoint], sent: dict[str, int]) -> None:
    """Lock the conversations ``ops`` change (``lock_conversations``), read the senders'
    rows ahead (``sent``) and check the catalog version.

    On PostgreSQL commits of many hosts run at once, and two must not read and write one
    conversation's sequence numbers and state at the same time; under SQLite's single
    writer the statement locks nothing. Every read after it sees what the previous holder
    committed. The catalog version comes with the lock (on PostgreSQL the lock, the
    prefetch and BEGIN go in one round trip): DDL since the statements ran rechecks them."""
    conn = ctx.conn
    changed = conversations(ops, eps)
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


def apply_ops(ctx: Context, ops: list[Op], eps: dict[str, Endpoint]) -> None:
    """Apply ``ops`` in order on ``ctx.conn``, after :func:`lock_and_check`."""
    conn = ctx.conn
    send = dialogs.send_user_message
    for op in ops:
        if type(op) is Send:  # the common case first, unpacked as the tuple it is
            handles, mtype, body, trace = op
            for handle in handles:
                send(ctx, handle, mtype, body, trace)
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
