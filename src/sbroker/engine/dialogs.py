"""What a committing transaction does to conversations, inside one short SQLite write
transaction: number and deliver messages, create target endpoints, end and close endpoints,
fire conversation timers and lifetimes.  Routing to another instance leaves the message in the
transmission queue for the transmitter."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field, fields
from typing import Any

from sbroker.core import messages as m
from sbroker.core.conversation import (
    SENDABLE,
    Effect,
    Event,
    State,
    transition,
)
from sbroker.core.errors import CommitConflictError
from sbroker.core.priority import match_priority
from sbroker.engine.catalog import Catalog
from sbroker.storage.sqlite.sweeper import live

ANTI_REPLAY_SECONDS = 30 * 60
NEVER = 9.0e18  # "no deadline" for REAL columns

STATUS_NO_ROUTE = (
    "The target service name could not be found. Ensure that the service name is specified "
    "correctly and/or the routing information has been supplied."
)
STATUS_QUEUE_DISABLED = "The destination queue is disabled (status off); waiting for ALTER QUEUE."


@dataclass
class Endpoint:
    """One row of sb_endpoints."""

    conv_order: int | None
    handle: str
    conversation_id: str
    is_initiator: bool
    group_id: str
    queue_id: int
    service: str
    far_service: str
    far_broker_instance: str | None
    contract: str
    state: str
    priority: int
    send_seq: int
    receive_seq: int
    lifetime_expires: float
    timer_at: float | None
    created_at: float
    encryption: bool = True


_COLUMNS = ", ".join(f.name for f in fields(Endpoint))
_SELECT = f"SELECT {_COLUMNS} FROM sb_endpoints"


def _row(row: tuple[object, ...] | None) -> Endpoint | None:
    if row is None:
        return None
    ep = Endpoint(*row)  # type: ignore[arg-type]
    ep.is_initiator = bool(ep.is_initiator)
    ep.encryption = bool(ep.encryption)
    return ep


def load_endpoint(conn: sqlite3.Connection, handle: str) -> Endpoint | None:
    return _row(conn.execute(f"{_SELECT} WHERE handle = ?", (handle,)).fetchone())


def load_peer(conn: sqlite3.Connection, ep: Endpoint) -> Endpoint | None:
    return _row(
        conn.execute(
            f"{_SELECT} WHERE conversation_id = ? AND is_initiator = ?",
            (ep.conversation_id, int(not ep.is_initiator)),
        ).fetchone()
    )


class Fast:
    """A conversation whose SENDs this commit numbers in memory: its next sequence number,
    the one stored in its row, its rowid, and its peer's part of a queue row (queue_id,
    group_id, handle, conv_order, priority, service, contract)."""

    __slots__ = ("conv_order", "peer", "seq", "written")

    def __init__(self, seq: int, written: int, conv_order: int,
                 peer: tuple[int, str, str, int, int, str, str]) -> None:
        self.seq = seq
        self.written = written
        self.conv_order = conv_order
        self.peer = peer


@dataclass
class Context:
    """Everything commit-time code needs; collects the queues that got ready messages."""

    conn: sqlite3.Connection
    catalog: Catalog
    now: float
    anti_replay: float = ANTI_REPLAY_SECONDS
    ready_queues: set[int] = field(default_factory=set)
    tq_changed: bool = False
    # SENDs numbered in memory (see send_user_message), per sender handle.
    fast: dict[str, Fast] = field(default_factory=dict)
    rows: list[tuple[object, ...]] = field(default_factory=list)
    last_peer: Endpoint | None = None
    changed: set[str] = field(default_factory=set)  # endpoints whose state changed or left
    # Many SENDs in one commit (see prefetch_senders): sender rows read in one statement
    # (``ready``: conversations the fast path can take from their first message; ``pre``:
    # the others, whole), the endpoints the commit has touched since, and send_seq writes
    # kept for flush.
    ready: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    pre: dict[str, tuple[object, ...]] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)
    seqs: dict[str, tuple[int, int | None]] = field(default_factory=dict)  # (seq, rowid)


def insert_endpoint(ctx: Context, ep: Endpoint) -> None:
    cols = [f.name for f in fields(Endpoint) if f.name != "conv_order"]
    cur = ctx.conn.execute(
        f"INSERT INTO sb_endpoints({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
        [getattr(ep, c) for c in cols],
    )
    ep.conv_order = cur.lastrowid


def _save_state(ctx: Context, ep: Endpoint) -> None:
    ctx.changed.add(ep.handle)
    ctx.conn.execute(
        "UPDATE sb_endpoints SET state = ?, send_seq = ?, receive_seq = ? WHERE handle = ?",
        (ep.state, ep.send_seq, ep.receive_seq, ep.handle),
    )


_INSERT = (
    "INSERT INTO sb_messages(queue_id, group_id, handle, conv_order, msn, status, priority,"
    " is_timer, message_type, validation, body, message_id, service, contract, enqueued_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _enqueue(
    ctx: Context, ep: Endpoint, msn: int, mtype: str, body: bytes, message_id: str,
    *, status: int = 1, is_timer: bool = False, defer: bool = False,
) -> None:
    """Insert a queue row (``defer``: batched until :func:`flush`, same commit)."""
    validation = ctx.catalog.message_types[mtype].validation_code if (
        mtype in ctx.catalog.message_types) else "N"
    row = (ep.queue_id, ep.group_id, ep.handle, ep.conv_order, msn, status, ep.priority,
           int(is_timer), mtype, validation, body, message_id, ep.service, ep.contract,
           ctx.now)
    if defer:
        ctx.rows.append(row)
    else:
        ctx.conn.execute(_INSERT, row)
    if status == 1:
        ctx.ready_queues.add(ep.queue_id)


def delete_endpoint(ctx: Context, ep: Endpoint) -> None:
    ctx.changed.add(ep.handle)
    _delete_messages(ctx, ep)
    ctx.conn.execute("DELETE FROM sb_transmission_queue WHERE handle = ?", (ep.handle,))
    ctx.conn.execute("DELETE FROM sb_endpoints WHERE handle = ?", (ep.handle,))


# The queue's counters (sb_queue_counters) take the rows a delete removes: received ones
# (retained, or marked in sb_consumed and not swept yet) and unreceived ready ones.
_COUNT_LEAVING = (
    "INSERT INTO sb_queue_counters(queue_id, received, removed)"
    " SELECT ?, count(*) FILTER (WHERE status = 0 OR c.queuing_order IS NOT NULL),"
    " count(*) FILTER (WHERE status = 1 AND c.queuing_order IS NULL) FROM sb_messages m"
    " LEFT JOIN sb_consumed c ON c.queuing_order = m.queuing_order"
    " WHERE m.group_id = ? AND m.handle = ? AND m.status IN (0, 1)"
    " ON CONFLICT(queue_id) DO UPDATE SET received = received + excluded.received,"
    " removed = removed + excluded.removed"
)


def _delete_messages(ctx: Context, ep: Endpoint) -> None:
    """Delete the conversation's rows from its queue (found through the group index),
    counting them first."""
    key = (ep.group_id, ep.handle)
    ctx.conn.execute(_COUNT_LEAVING, (ep.queue_id, *key))
    ctx.conn.execute("DELETE FROM sb_messages WHERE group_id = ? AND handle = ?", key)


def _is_local(ctx: Context, ep: Endpoint) -> bool:
    """Whether the far service is served here (no explicit route sends it elsewhere)."""
    return _is_local_to(ctx, ep.far_service, ep.far_broker_instance)


def _is_local_to(ctx: Context, far_service: str, far_broker_instance: str | None) -> bool:
    if far_broker_instance not in (None, ctx.catalog.broker_instance):
        return False
    for route in ctx.catalog.routes:
        if route.service_name == far_service and route.address.startswith("tcp://") and (
            route.expires_at is None or route.expires_at > ctx.now
        ):
            return False
    return far_service in ctx.catalog.services


def transmit(ctx: Context, ep: Endpoint, mtype: str, body: bytes) -> None:
    """Number a (system) message on ``ep`` whatever its state, then route it."""
    msn = ep.send_seq
    ep.send_seq += 1
    _save_state(ctx, ep)
    _route(ctx, ep, msn, mtype, body)


# SEND at commit, one read: the sender, whether it has messages waiting in the transmission
# queue (they must go first), and its peer endpoint if that is in this database.
_SENDER = (
    "SELECT " + ", ".join(f"s.{f.name}" for f in fields(Endpoint))
    + ", EXISTS(SELECT 1 FROM sb_transmission_queue t WHERE t.handle = s.handle), "
    + ", ".join(f"p.{f.name}" for f in fields(Endpoint))
    + " FROM sb_endpoints s LEFT JOIN sb_endpoints p ON p.conversation_id = s.conversation_id"
    " AND p.is_initiator = 1 - s.is_initiator WHERE s.handle = ?"
)
_SENDERS = _SENDER.replace("s.handle = ?", "s.handle IN (SELECT value FROM json_each(?))")
# The senders a commit's SENDs can number in memory from their first message: both ends
# conversing, nothing waiting in the transmission queue; only what the queue row needs.
# Found by rowid (a third of the cost of the handle index), so the handle must be checked.
_READY = (
    "SELECT s.handle, s.conv_order, s.send_seq, s.queue_id, s.far_service,"
    " s.far_broker_instance, p.queue_id, p.group_id, p.handle, p.conv_order, p.priority,"
    " p.service, p.contract FROM sb_endpoints s JOIN sb_endpoints p"
    " ON p.conversation_id = s.conversation_id AND p.is_initiator = 1 - s.is_initiator"
    " WHERE s.conv_order IN (SELECT value FROM json_each(?)) AND s.state = 'CO'"
    " AND p.state = 'CO'"
    " AND NOT EXISTS(SELECT 1 FROM sb_transmission_queue t WHERE t.handle = s.handle)"
)
_N_FIELDS = len(fields(Endpoint))
_PEER_HANDLE = _N_FIELDS + 2  # the peer's handle in a _SENDER row
_CO = State.CO.value


def _direct(ctx: Context, sender_queue: int, far_service: str,
            far_broker_instance: str | None) -> bool:
    """Whether a user message from a conversing endpoint goes straight into its local peer's
    queue, as :func:`_route` and :func:`deliver_local` would put it: the sender's queue keeps
    no copies, the far service is here and its queue is enabled."""
    queue = ctx.catalog.queues_by_id.get(sender_queue)
    if queue is None or queue.retention or not _is_local_to(ctx, far_service,
                                                             far_broker_instance):
        return False
    target = ctx.catalog.queues_by_id.get(ctx.catalog.services[far_service].queue_id)
    return target is not None and target.status


def prefetch_senders(ctx: Context, senders: dict[str, int]) -> None:
    """Read the sender rows of a commit's SENDs in one statement instead of one each (two
    when some cannot take the fast path from their first message: those are read whole).
    ``senders``: handle -> its rowid when the statement ran (a row since deleted, or its
    rowid reused, is only not found here).

    A prefetched row is used once, and only while neither its endpoint nor its peer has been
    touched by this commit (send_user_message checks); otherwise the row is read again.
    """
    ctx.ready.clear()
    if len(senders) < 2:
        return
    whole = dict.fromkeys(senders)
    direct: dict[tuple[int, str, str | None], bool] = {}  # for this commit's catalog and now
    for row in ctx.conn.execute(_READY, (json.dumps(list(senders.values())),)):
        if row[0] not in whole:
            continue  # the rowid of another endpoint now
        key = (row[3], row[4], row[5])
        ok = direct.get(key)
        if ok is None:
            ok = direct[key] = _direct(ctx, *key)
        if ok:
            ctx.ready[row[0]] = row
            del whole[row[0]]
    if len(whole) > 1:
        rows = ctx.conn.execute(_SENDERS, (json.dumps(list(whole)),)).fetchall()
        ctx.pre = {row[1]: row for row in rows}


def _is_touched(ctx: Context, handle: str, peer: object) -> bool:
    """Whether this commit changed the endpoint or its peer since their row was read."""
    return (handle in ctx.touched or handle in ctx.changed or peer in ctx.touched
            or peer in ctx.changed)


def _take_ready(ctx: Context, handle: str) -> Fast | None:
    """The fast path's entry for a first message on a conversation read by prefetch_senders."""
    row = ctx.ready.pop(handle, None)
    if row is None or _is_touched(ctx, handle, row[8]):
        return None
    ctx.touched.add(handle)
    ctx.touched.add(row[8])
    fast = ctx.fast[handle] = Fast(row[2], row[2], row[1], row[6:])
    return fast


def _read_sender(ctx: Context, handle: str) -> tuple[object, ...] | None:
    row = ctx.pre.pop(handle, None) if ctx.pre else None
    if row is not None and _is_touched(ctx, handle, row[_PEER_HANDLE]):
        row = None  # this commit changed it since it was read
    if row is None:
        _write_seqs(ctx)  # what we read must be what is true
        row = ctx.conn.execute(_SENDER, (handle,)).fetchone()
    return row


def _write_seqs(ctx: Context) -> None:
    """Store the send_seq numbers kept in memory (ordinary path and fast path)."""
    for handle, fast in ctx.fast.items():
        if fast.seq != fast.written:
            ctx.seqs[handle] = (fast.seq, fast.conv_order)
            fast.written = fast.seq
    if ctx.seqs:
        ctx.conn.executemany("UPDATE sb_endpoints SET send_seq = ? WHERE conv_order = ?",
                             list(ctx.seqs.values()))  # by rowid: no index lookup
        ctx.seqs.clear()


def send_user_message(ctx: Context, handle: str, mtype: str, body: bytes) -> None:
    """SEND at commit: allocate the sequence number and move SO/SI to CO in one statement.

    A message that goes straight into a local peer's queue (both ends in CO) is numbered in
    memory and inserted in one ``executemany`` at :func:`flush` with the others — the peer
    cannot change meanwhile: we hold the writer.  Such a conversation is known after one
    message went the ordinary way, or from its first message when prefetch_senders read it.
    """
    fast = ctx.fast.get(handle)
    if fast is None and ctx.ready and mtype not in m.SYSTEM_MESSAGE_TYPES:
        fast = _take_ready(ctx, handle)
    if fast is not None:
        mt = ctx.catalog.message_types.get(mtype)
        if mt is not None and mt.check(body) is None:
            queue_id, group_id, peer, conv_order, priority, service, contract = fast.peer
            ctx.rows.append((
                queue_id, group_id, peer, conv_order, fast.seq, 1, priority, 0, mtype,
                mt.validation_code, body, m.new_id(), service, contract, ctx.now,
            ))
            fast.seq += 1
            ctx.ready_queues.add(queue_id)
            return
        flush(ctx)  # an invalid body: the ordinary path produces the Error
    row = _read_sender(ctx, handle)
    if row is None:
        raise CommitConflictError(
            f"the conversation {handle} was ended and removed before COMMIT", 8426
        )
    ep = _row(row[:_N_FIELDS])
    assert ep is not None
    if ep.state not in SENDABLE:
        raise CommitConflictError(
            f"the conversation {handle} changed to state {ep.state} before COMMIT;"
            " SEND is no longer allowed", 8429,
        )
    msn = ep.send_seq
    ep.send_seq += 1
    if ep.state == _CO:
        ctx.seqs[handle] = (ep.send_seq, ep.conv_order)  # written by flush, with the others
    else:
        ep.state = _CO
        _save_state(ctx, ep)
    ctx.touched.add(handle)
    peer_row = row[_N_FIELDS + 1:]
    if peer_row[0] is not None:
        ctx.touched.add(str(peer_row[1]))
    prefetched = (bool(row[_N_FIELDS]), _row(peer_row) if peer_row[0] is not None else None)
    ctx.last_peer = None
    _route(ctx, ep, msn, mtype, body, prefetched=prefetched)
    last = ctx.last_peer
    if last is not None and last.state == _CO:
        queue = ctx.catalog.queues_by_id.get(ep.queue_id)
        if queue is not None and not queue.retention and ep.conv_order is not None:
            ctx.fast[handle] = Fast(ep.send_seq, ep.send_seq, ep.conv_order, (
                last.queue_id, last.group_id, last.handle, last.conv_order, last.priority,
                last.service, last.contract))


def flush(ctx: Context) -> None:
    """Write what the SEND fast path kept in memory: message rows and sequence numbers."""
    if ctx.rows:
        ctx.conn.executemany(_INSERT, ctx.rows)
        ctx.rows.clear()
    _write_seqs(ctx)
    ctx.fast.clear()


# One statement: does the conversation have messages waiting in the transmission queue (they
# must go first), and the peer endpoint if it exists.
_PEER_AND_PENDING = (
    "SELECT EXISTS(SELECT 1 FROM sb_transmission_queue WHERE handle = ?), "
    + ", ".join(f"e.{f.name}" for f in fields(Endpoint))
    + " FROM (SELECT 1) LEFT JOIN sb_endpoints e ON e.conversation_id = ? AND e.is_initiator = ?"
)
_UNLOADED = object()


def _route(ctx: Context, ep: Endpoint, msn: int, mtype: str, body: bytes, *,
           prefetched: tuple[bool, Endpoint | None] | None = None) -> None:
    """Deliver locally, or leave the message in the transmission queue.  ``prefetched``:
    (messages waiting in the transmission queue, peer endpoint) when the caller read them."""
    message_id = m.new_id()
    queue = ctx.catalog.queues_by_id.get(ep.queue_id)
    if queue is not None and queue.retention and mtype not in m.SYSTEM_MESSAGE_TYPES:
        _enqueue(ctx, ep, msn, mtype, body, message_id, status=3)
    if _is_local(ctx, ep):
        if prefetched is None:
            row = ctx.conn.execute(
                _PEER_AND_PENDING, (ep.handle, ep.conversation_id, int(not ep.is_initiator))
            ).fetchone()
            prefetched = (bool(row[0]), _row(row[1:]) if row[1] is not None else None)
        pending, peer = prefetched
        if not pending:
            status = deliver_local(ctx, ep, msn, mtype, body, message_id, peer=peer)
            if status is None:
                return
        else:
            status = "waiting behind earlier messages of this conversation"
    else:
        status = "" if _has_route(ctx, ep) else STATUS_NO_ROUTE
    _to_transmission_queue(ctx, ep, msn, mtype, body, message_id, status)


def _has_route(ctx: Context, ep: Endpoint) -> bool:
    return any(
        (r.service_name in (None, ep.far_service))
        and r.address != "LOCAL"
        and (r.expires_at is None or r.expires_at > ctx.now)
        for r in ctx.catalog.routes
    )


def _to_transmission_queue(
    ctx: Context, ep: Endpoint, msn: int, mtype: str, body: bytes, message_id: str, status: str
) -> None:
    priority = ep.priority  # shown as is; the transmitter sends all as 5 unless honored
    ctx.conn.execute(
        "INSERT INTO sb_transmission_queue(handle, conversation_id, is_initiator, from_service,"
        " to_service, to_broker_instance, contract, message_type, msn, body, priority,"
        " message_id, enqueued_at, transmission_status, is_end_of_conversation)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (ep.handle, ep.conversation_id, int(ep.is_initiator), ep.service, ep.far_service,
         ep.far_broker_instance, ep.contract, mtype, msn, body, priority, message_id, ctx.now,
         status, int(mtype in (m.END_DIALOG, m.ERROR))),
    )
    ctx.tq_changed = True


def _create_target(ctx: Context, sender: Endpoint) -> Endpoint | str:
    """The target endpoint for a first message, or an error (code, text) to return."""
    service = ctx.catalog.services[sender.far_service]
    if sender.contract not in service.contracts:
        return f"{m.CONTRACT_NOT_SUPPORTED}:The target service {service.name!r} does not " \
               f"support contract {sender.contract!r}."
    ep = Endpoint(
        conv_order=None, handle=m.new_id(), conversation_id=sender.conversation_id,
        is_initiator=False, group_id=m.new_id(), queue_id=service.queue_id,
        service=service.name, far_service=sender.service,
        far_broker_instance=ctx.catalog.broker_instance, contract=sender.contract,
        state=State.SI.value,
        priority=match_priority(
            ctx.catalog.priorities, sender.contract, service.name, sender.service
        ),
        send_seq=0, receive_seq=0, lifetime_expires=sender.lifetime_expires, timer_at=None,
        created_at=ctx.now, encryption=sender.encryption,
    )
    insert_endpoint(ctx, ep)
    return ep


def deliver_local(
    ctx: Context, sender: Endpoint, msn: int, mtype: str, body: bytes, message_id: str,
    *, peer: Endpoint | None | object = _UNLOADED,
) -> str | None:
    """Deliver to the peer endpoint in this database; a transmission status if it must wait."""
    target_service = ctx.catalog.services[sender.far_service]
    queue = ctx.catalog.queues_by_id[target_service.queue_id]
    if not queue.status:
        return STATUS_QUEUE_DISABLED
    if peer is _UNLOADED:
        peer = load_peer(ctx.conn, sender)
    assert peer is None or isinstance(peer, Endpoint)
    if peer is None:
        if not sender.is_initiator:
            return None  # the initiator is gone (cleaned up): nothing to deliver to
        if mtype in (m.END_DIALOG, m.ERROR):
            return None  # ended before anything reached the target: nothing to tell
        created = _create_target(ctx, sender)
        if isinstance(created, str):
            code, _, text = created.partition(":")
            _broker_error(ctx, sender, int(code), text)
            return None
        peer = created
    mt = ctx.catalog.message_types.get(mtype)
    if mt is None:
        _broker_error(ctx, sender, m.UNKNOWN_MESSAGE_TYPE,
                      f"The message type {mtype!r} is not defined in the target database.")
        return None
    reason = mt.check(body)
    if reason is not None:
        _broker_error(
            ctx, sender, m.VALIDATION_FAILED,
            f"A message of type {mtype!r} failed validation: {reason}",
        )
        return None
    event = {m.END_DIALOG: Event.PEER_END, m.ERROR: Event.PEER_ERROR}.get(mtype, Event.MESSAGE_IN)
    state, effects = transition(peer.state, event)
    if state.value != peer.state:
        # Local delivery is in order by construction, so receive_seq only needs writing
        # when the state changes or a gap must be recorded: one row write less per message.
        peer.state = state.value
        peer.receive_seq = max(peer.receive_seq, msn + 1)
        _save_state(ctx, peer)
    if Effect.ENQUEUE in effects:
        user = mtype not in m.SYSTEM_MESSAGE_TYPES
        _enqueue(ctx, peer, msn, mtype, body, message_id, defer=user)
        if user:
            ctx.last_peer = peer
    if Effect.CLOSE in effects:
        close(ctx, peer)
    return None


def _broker_error(ctx: Context, ep: Endpoint, code: int, text: str) -> None:
    """Put a broker-generated Error in ``ep``'s own queue and move it to ER."""
    state, effects = transition(ep.state, Event.PEER_ERROR)
    ep.state = state.value
    _save_state(ctx, ep)
    if Effect.ENQUEUE in effects:
        _enqueue(ctx, ep, _next_inbound(ctx, ep), m.ERROR, m.error_body(code, text), m.new_id())
    if Effect.CLOSE in effects:
        close(ctx, ep)


def _next_inbound(ctx: Context, ep: Endpoint) -> int:
    """The sequence number of an Error the broker puts in ``ep``'s queue: after every message
    already queued there (receive_seq is not written on every local delivery)."""
    row = ctx.conn.execute(
        "SELECT max(msn) FROM sb_messages WHERE group_id = ? AND handle = ? AND status != 3"
        f" AND is_timer = 0 AND {live('sb_messages')}", (ep.group_id, ep.handle),
    ).fetchone()
    return ep.receive_seq if row[0] is None else max(ep.receive_seq, row[0] + 1)


def close(ctx: Context, ep: Endpoint) -> None:
    """Both sides have ended: delete ``ep`` (and a local peer that already ended)."""
    local_peer = load_peer(ctx.conn, ep)
    remote = local_peer is None and ep.far_broker_instance not in (
        None, ctx.catalog.broker_instance)
    keep = remote and not ep.is_initiator
    if not keep and local_peer is None and ep.is_initiator and not _is_local(ctx, ep):
        # A remote initiator waits until its last message (EndDialog) is acknowledged; the
        # network layer deletes it then, delete_after bounds the wait.
        keep = ctx.conn.execute(
            "SELECT 1 FROM sb_transmission_queue WHERE handle = ? LIMIT 1", (ep.handle,)
        ).fetchone() is not None
    if keep:
        # Keep the closed target for the anti-replay window, without its messages.
        _delete_messages(ctx, ep)
        ctx.conn.execute(
            "UPDATE sb_endpoints SET state = 'CD', closed_at = ?, delete_after = ?,"
            " timer_at = NULL, lifetime_expires = ? WHERE handle = ?",
            (ctx.now, ctx.now + ctx.anti_replay, NEVER, ep.handle),
        )
    else:
        delete_endpoint(ctx, ep)
    if local_peer is not None and local_peer.state in (State.DO.value, State.CD.value):
        delete_endpoint(ctx, local_peer)


def end(ctx: Context, ep: Endpoint, error: int | None, description: str | None,
        cleanup: bool) -> None:
    """END CONVERSATION: plain, WITH ERROR, or WITH CLEANUP."""
    if cleanup:
        delete_endpoint(ctx, ep)
        return
    prior = ep.state
    state, effects = transition(ep.state, Event.END if error is None else Event.END_WITH_ERROR)
    ep.state = state.value
    _save_state(ctx, ep)
    _delete_messages(ctx, ep)
    ctx.conn.execute("UPDATE sb_endpoints SET timer_at = NULL WHERE handle = ?", (ep.handle,))
    if Effect.SEND_END_DIALOG in effects:
        transmit(ctx, ep, m.END_DIALOG, b"")
    if Effect.SEND_ERROR in effects:
        drop_pending(ctx, ep)
        transmit(ctx, ep, m.ERROR, m.error_body(int(error or 0), description or ""))
    if Effect.CLOSE in effects and prior in ("DI", "ER") and not _is_local(ctx, ep):
        transmit(ctx, ep, m.END_DIALOG, b"")  # a remote peer waits in DO for our end
    if Effect.CLOSE in effects:
        close(ctx, ep)


def drop_pending(ctx: Context, ep: Endpoint) -> None:
    """Drop ``ep``'s unsent messages; toward a remote peer they become empty placeholders
    (:data:`messages.DROPPED`) so that the sequence numbers the peer expects have no gap."""
    if _is_local(ctx, ep):
        ctx.conn.execute("DELETE FROM sb_transmission_queue WHERE handle = ?", (ep.handle,))
    else:
        ctx.conn.execute(
            "UPDATE sb_transmission_queue SET message_type = ?, body = x'',"
            " is_end_of_conversation = 0 WHERE handle = ?", (m.DROPPED, ep.handle),
        )


def apply_incoming(
    ctx: Context, ep: Endpoint, msn: int, mtype: str, body: bytes, message_id: str
) -> None:
    """A message from a remote peer, in order, for local endpoint ``ep`` (already checked):
    the state transition, receive_seq (always written), the queue row, the close."""
    event = {m.END_DIALOG: Event.PEER_END, m.ERROR: Event.PEER_ERROR}.get(mtype, Event.MESSAGE_IN)
    state, effects = transition(ep.state, event)
    ep.state = state.value
    ep.receive_seq = max(ep.receive_seq, msn + 1)
    _save_state(ctx, ep)
    if Effect.ENQUEUE in effects:
        _enqueue(ctx, ep, msn, mtype, body, message_id)
    if Effect.CLOSE in effects:
        close(ctx, ep)


def fire_due(ctx: Context) -> float | None:
    """Fire conversation timers and lifetimes due by ``ctx.now``; the next deadline."""
    conn = ctx.conn
    for ep in [_row(r) for r in conn.execute(
        f"{_SELECT} WHERE timer_at IS NOT NULL AND timer_at <= ?", (ctx.now,)
    ).fetchall()]:
        assert ep is not None
        conn.execute("UPDATE sb_endpoints SET timer_at = NULL WHERE handle = ?", (ep.handle,))
        if ep.state != State.CD.value:
            _enqueue(ctx, ep, -1, m.DIALOG_TIMER, b"", m.new_id(), is_timer=True)
    for ep in [_row(r) for r in conn.execute(
        f"{_SELECT} WHERE lifetime_expires <= ? AND state NOT IN ('ER', 'CD')", (ctx.now,)
    ).fetchall()]:
        assert ep is not None
        current = load_endpoint(conn, ep.handle)
        if current is None:
            continue  # deleted by its peer's close earlier in this loop
        state, effects = transition(current.state, Event.LIFETIME_EXPIRED)
        current.state = state.value
        _save_state(ctx, current)
        conn.execute(
            "UPDATE sb_endpoints SET lifetime_expires = ? WHERE handle = ?", (NEVER, ep.handle)
        )
        if Effect.ENQUEUE_LIFETIME_ERROR in effects:
            drop_pending(ctx, current)
            _enqueue(ctx, current, _next_inbound(ctx, current), m.ERROR, m.error_body(
                m.LIFETIME_EXPIRED, "The conversation lifetime has expired."), m.new_id())
        if Effect.CLOSE in effects:
            close(ctx, current)
    conn.execute(
        "DELETE FROM sb_endpoints WHERE delete_after IS NOT NULL AND delete_after <= ?",
        (ctx.now,),
    )
    row = conn.execute(
        "SELECT min(t) FROM ("
        " SELECT min(timer_at) AS t FROM sb_endpoints WHERE timer_at IS NOT NULL"
        " UNION ALL SELECT min(lifetime_expires) FROM sb_endpoints"
        "  WHERE state NOT IN ('ER', 'CD')"
        " UNION ALL SELECT min(delete_after) FROM sb_endpoints WHERE delete_after IS NOT NULL)"
    ).fetchone()
    return None if row[0] is None or row[0] >= NEVER else float(row[0])


def redeliver_waiting(ctx: Context) -> int:
    """Move messages waiting in the transmission queue for local services into their queues,
    in order per conversation; how many were delivered."""
    delivered = 0
    blocked: set[str] = set()
    rows = ctx.conn.execute(
        "SELECT tq_id, handle, msn, message_type, body, message_id FROM sb_transmission_queue"
        " ORDER BY handle, msn"
    ).fetchall()
    for tq_id, handle, msn, mtype, body, message_id in rows:
        if handle in blocked:
            continue
        ep = load_endpoint(ctx.conn, handle)
        if ep is None:
            ctx.conn.execute("DELETE FROM sb_transmission_queue WHERE tq_id = ?", (tq_id,))
            continue
        if not _is_local(ctx, ep):
            blocked.add(handle)
            continue
        status = deliver_local(ctx, ep, msn, mtype, body, message_id)
        if status is None:
            ctx.conn.execute("DELETE FROM sb_transmission_queue WHERE tq_id = ?", (tq_id,))
            delivered += 1
        else:
            ctx.conn.execute(
                "UPDATE sb_transmission_queue SET transmission_status = ? WHERE tq_id = ?",
                (status, tq_id),
            )
            blocked.add(handle)
    flush(ctx)
    return delivered
