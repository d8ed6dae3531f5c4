"""What a committing transaction does to conversations, inside one short write transaction:
number and deliver messages (the SEND path: in memory for conversing local peers, or straight
into their queues through the backend's send path),
create target endpoints, end and close endpoints.  Routing to another instance leaves the
message in the transmission queue for the transmitter."""

from __future__ import annotations

from dataclasses import fields

from sbroker.core import messages as m
from sbroker.core.conversation import SENDABLE, Effect, Event, State, transition
from sbroker.core.errors import CommitConflictError
from sbroker.core.priority import match_priority
from sbroker.engine.endpoints import (
    NEVER,
    STATUS_NO_ROUTE,
    STATUS_QUEUE_DISABLED,
    Context,
    Endpoint,
    Fast,
    delete_endpoint,
    delete_messages,
    enqueue,
    from_row,
    has_route,
    insert_endpoint,
    is_local,
    is_local_to,
    load_peer,
    save_state,
)
from sbroker.engine.ops import Op, Send
from sbroker.storage.ports import Direct, SendPath

_N_FIELDS = len(fields(Endpoint))

_PEER_HANDLE = _N_FIELDS + 2  # the peer's handle in a _SENDER row

_CO = State.CO.value

def transmit(ctx: Context, ep: Endpoint, mtype: str, body: bytes) -> None:
    """Number a (system) message on ``ep`` whatever its state, then route it."""
    msn = ep.send_seq
    ep.send_seq += 1
    save_state(ctx, ep)
    _route(ctx, ep, msn, mtype, body)

def _direct(ctx: Context, sender_queue: int, far_service: str,
            far_broker_instance: str | None) -> bool:
    """Whether a user message from a conversing endpoint goes straight into its local peer's
    queue, as :func:`_route` and :func:`deliver_local` would put it: the sender's queue keeps
    no copies, the far service is here and its queue is enabled."""
    queue = ctx.catalog.queues_by_id.get(sender_queue)
    if queue is None or queue.retention or not is_local_to(ctx, far_service,
                                                             far_broker_instance):
        return False
    target = ctx.catalog.queues_by_id.get(ctx.catalog.services[far_service].queue_id)
    return target is not None and target.status

def prefetch_senders(ctx: Context, senders: dict[str, int]) -> None:
    """Read the sender rows of a commit's SENDs in one statement instead of one each (two
    when some cannot take the fast path from their first message: those are read whole; a
    single one that cannot is read by send_user_message).
    ``senders``: handle -> its rowid when the statement ran (a row since deleted, or its
    rowid reused, is only not found here).

    A prefetched row is used once, and only while neither its endpoint nor its peer has been
    touched by this commit (send_user_message checks); otherwise the row is read again.
    """
    sending = ctx.sending
    sending.ready.clear()
    sending.pre = {}
    if not senders:
        return
    whole = dict.fromkeys(senders)
    direct: dict[tuple[int, str, str | None], bool] = {}  # for this commit's catalog and now
    sql = ctx.conn.sql
    for row in ctx.conn.execute(sql.ready_senders, (ctx.conn.ids(senders.values()),)):
        if row[0] not in whole:
            continue  # the rowid of another endpoint now
        key = (row[3], row[4], row[5])
        ok = direct.get(key)
        if ok is None:
            ok = direct[key] = _direct(ctx, *key)
        if ok:
            sending.ready[row[0]] = row
            del whole[row[0]]
    if len(whole) > 1:
        rows = ctx.conn.query_all(sql.senders, (ctx.conn.ids(whole),))
        sending.pre = {row[1]: row for row in rows}

def direct_sends(ctx: Context, path: SendPath, ops: list[Op], eps: dict[str, Endpoint]
                 ) -> list[Direct] | None:
    """A commit of SENDs only, each on a conversation whose local peer conversed at its last
    commit (as ``path`` remembers) and with a message this catalog accepts: what the
    backend's send path is asked to put straight into the peers' queues.  None when this
    process already knows one of them cannot go so (the ordinary path then decides).

    Whether a sender's queue and far service let it go straight (:func:`_direct`) is worked
    out once per distinct (queue, far service, broker) of the commit: the catalog and the
    time are the commit's throughout."""
    out: list[Direct] = []
    append = out.append
    types = ctx.catalog.message_types
    peer_of = path.peer
    new_id = m.new_id
    direct: dict[tuple[int, str, str | None], bool] = {}
    for op in ops:
        if type(op) is not Send:
            return None
        mtype, body = op.message_type, op.body
        mt = types.get(mtype)
        if mt is None or mtype in m.SYSTEM_MESSAGE_TYPES or mt.check(body) is not None:
            return None
        code = mt.validation_code
        for handle in op.handles:
            peer = peer_of(handle)
            ep = eps.get(handle)
            if peer is None or ep is None or ep.conv_order is None:
                return None
            key = (ep.queue_id, ep.far_service, ep.far_broker_instance)
            ok = direct.get(key)
            if ok is None:
                ok = direct[key] = _direct(ctx, *key)
            if not ok:
                return None
            append(Direct(ep.conv_order, handle, peer[0], peer[1], mtype, code, body,
                          new_id()))
    return out

def _is_touched(ctx: Context, handle: str, peer: object) -> bool:
    """Whether this commit changed the endpoint or its peer since their row was read."""
    touched = ctx.sending.touched
    return (handle in touched or handle in ctx.changed or peer in touched
            or peer in ctx.changed)

def _take_ready(ctx: Context, handle: str) -> Fast | None:
    """The fast path's entry for a first message on a conversation read by prefetch_senders."""
    sending = ctx.sending
    row = sending.ready.pop(handle, None)
    if row is None or _is_touched(ctx, handle, row[8]):
        return None
    sending.touched.add(handle)
    sending.touched.add(row[8])
    fast = sending.fast[handle] = Fast(row[2], row[2], row[1], row[6:])
    sending.learn(handle, row[9], row[6])
    return fast

def _read_sender(ctx: Context, handle: str) -> tuple[object, ...] | None:
    pre = ctx.sending.pre
    row = pre.pop(handle, None) if pre else None
    if row is not None and _is_touched(ctx, handle, row[_PEER_HANDLE]):
        row = None  # this commit changed it since it was read
    if row is None:
        _write_seqs(ctx)  # what we read must be what is true
        row = ctx.conn.query_one(ctx.conn.sql.sender, (handle,))
    return row

def _write_seqs(ctx: Context) -> None:
    """Store the send_seq numbers kept in memory (ordinary path and fast path)."""
    sending = ctx.sending
    for handle, fast in sending.fast.items():
        if fast.seq != fast.written:
            sending.seqs[handle] = (fast.seq, fast.conv_order)
            fast.written = fast.seq
    if sending.seqs:
        ctx.conn.executemany(ctx.conn.sql.set_send_seq, list(sending.seqs.values()))
        sending.seqs.clear()

def _send_fast(ctx: Context, fast: Fast, mtype: str, body: bytes) -> bool:
    """Number the message in memory and batch its queue row; False (nothing done) when its
    body is invalid: the ordinary path then produces the Error."""
    mt = ctx.catalog.message_types.get(mtype)
    if mt is None or mt.check(body) is not None:
        return False
    queue_id, group_id, peer, conv_order, priority, service, contract = fast.peer
    ctx.rows.append((
        queue_id, group_id, peer, conv_order, fast.seq, 1, priority, 0, mtype,
        mt.validation_code, body, m.new_id(), service, contract, ctx.now, ctx.trace,
    ))
    fast.seq += 1
    ctx.ready_queues.add(queue_id)
    return True

def send_user_message(ctx: Context, handle: str, mtype: str, body: bytes) -> None:
    """SEND at commit: allocate the sequence number and move SO/SI to CO in one statement.

    A message that goes straight into a local peer's queue (both ends in CO) is numbered in
    memory and inserted in one ``executemany`` at :func:`flush` with the others — the peer
    cannot change meanwhile: the commit holds the writer or the conversation's lock.  Such a
    conversation is known after one message went the ordinary way, or from its first
    message when prefetch_senders read it.
    """
    sending = ctx.sending
    fast = sending.fast.get(handle)
    if fast is None and sending.ready and mtype not in m.SYSTEM_MESSAGE_TYPES:
        fast = _take_ready(ctx, handle)
    if fast is not None:
        if _send_fast(ctx, fast, mtype, body):
            return
        flush(ctx)
    ep, prefetched = _sender(ctx, handle)
    msn = ep.send_seq
    ep.send_seq += 1
    if ep.state == _CO:
        sending.seqs[handle] = (ep.send_seq, ep.conv_order)  # written by flush, with the others
    else:
        ep.state = _CO
        save_state(ctx, ep)
    sending.last_peer = None
    _route(ctx, ep, msn, mtype, body, prefetched=prefetched)
    last = sending.delivered_to()
    if last is not None and last.state == _CO and last.conv_order is not None:
        queue = ctx.catalog.queues_by_id.get(ep.queue_id)
        if queue is not None and not queue.retention and ep.conv_order is not None:
            sending.fast[handle] = Fast(ep.send_seq, ep.send_seq, ep.conv_order, (
                last.queue_id, last.group_id, last.handle, last.conv_order, last.priority,
                last.service, last.contract))
            sending.learn(handle, last.conv_order, last.queue_id)

def _sender(ctx: Context, handle: str) -> tuple[Endpoint, tuple[bool, Endpoint | None]]:
    """The sending endpoint as it is now (SEND must still be allowed), and what its row
    brought along: whether messages wait in the transmission queue, and its local peer."""
    row = _read_sender(ctx, handle)
    if row is None:
        raise CommitConflictError(
            f"the conversation {handle} was ended and removed before COMMIT", 8426
        )
    ep = from_row(row[:_N_FIELDS])
    assert ep is not None
    if ep.state not in SENDABLE:
        raise CommitConflictError(
            f"the conversation {handle} changed to state {ep.state} before COMMIT;"
            " SEND is no longer allowed", 8429,
        )
    touched = ctx.sending.touched
    touched.add(handle)
    peer_row = row[_N_FIELDS + 1:]
    if peer_row[0] is not None:
        touched.add(str(peer_row[1]))
    return ep, (bool(row[_N_FIELDS]), from_row(peer_row) if peer_row[0] is not None else None)

def flush(ctx: Context) -> None:
    """Write what the SEND fast path kept in memory: message rows and sequence numbers."""
    if ctx.rows:
        ctx.conn.executemany(ctx.conn.sql.insert_message, ctx.rows)
        ctx.rows.clear()
    _write_seqs(ctx)
    ctx.sending.fast.clear()

_UNLOADED = object()

def _route(ctx: Context, ep: Endpoint, msn: int, mtype: str, body: bytes, *,
           prefetched: tuple[bool, Endpoint | None] | None = None) -> None:
    """Deliver locally, or leave the message in the transmission queue.  ``prefetched``:
    (messages waiting in the transmission queue, peer endpoint) when the caller read them."""
    message_id = m.new_id()
    queue = ctx.catalog.queues_by_id.get(ep.queue_id)
    if queue is not None and queue.retention and mtype not in m.SYSTEM_MESSAGE_TYPES:
        enqueue(ctx, ep, msn, mtype, body, message_id, status=3)
    if is_local(ctx, ep):
        if prefetched is None:
            row = ctx.conn.query_one(ctx.conn.sql.peer_and_pending,
                                     (ep.handle, ep.conversation_id, int(not ep.is_initiator)))
            assert row is not None
            prefetched = (bool(row[0]), from_row(row[1:]) if row[1] is not None else None)
        pending, peer = prefetched
        if not pending:
            status = deliver_local(ctx, ep, msn, mtype, body, message_id, peer=peer)
            if status is None:
                return
        else:
            status = "waiting behind earlier messages of this conversation"
    else:
        status = "" if has_route(ctx, ep) else STATUS_NO_ROUTE
    _to_transmission_queue(ctx, ep, msn, mtype, body, message_id, status)

def _to_transmission_queue(
    ctx: Context, ep: Endpoint, msn: int, mtype: str, body: bytes, message_id: str, status: str
) -> None:
    priority = ep.priority  # shown as is; the transmitter sends all as 5 unless honored
    ctx.conn.execute(
        ctx.conn.sql.insert_transmission,
        (ep.handle, ep.conversation_id, int(ep.is_initiator), ep.service, ep.far_service,
         ep.far_broker_instance, ep.contract, mtype, msn, body, priority, message_id, ctx.now,
         status, int(mtype in (m.END_DIALOG, m.ERROR)), ctx.trace),
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
            broker_error(ctx, sender, int(code), text)
            return None
        peer = created
    mt = ctx.catalog.message_types.get(mtype)
    if mt is None:
        broker_error(ctx, sender, m.UNKNOWN_MESSAGE_TYPE,
                      f"The message type {mtype!r} is not defined in the target database.")
        return None
    reason = mt.check(body)
    if reason is not None:
        broker_error(
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
        save_state(ctx, peer)
    if Effect.ENQUEUE in effects:
        user = mtype not in m.SYSTEM_MESSAGE_TYPES
        enqueue(ctx, peer, msn, mtype, body, message_id, defer=user)
        if user:
            ctx.sending.last_peer = peer
    if Effect.CLOSE in effects:
        close(ctx, peer)
    return None

def broker_error(ctx: Context, ep: Endpoint, code: int, text: str) -> None:
    """Put a broker-generated Error in ``ep``'s own queue and move it to ER."""
    state, effects = transition(ep.state, Event.PEER_ERROR)
    ep.state = state.value
    save_state(ctx, ep)
    if Effect.ENQUEUE in effects:
        enqueue(ctx, ep, next_inbound(ctx, ep), m.ERROR, m.error_body(code, text), m.new_id())
    if Effect.CLOSE in effects:
        close(ctx, ep)

def next_inbound(ctx: Context, ep: Endpoint) -> int:
    """The sequence number of an Error the broker puts in ``ep``'s queue: after every message
    already queued there (receive_seq is not written on every local delivery)."""
    row = ctx.conn.query_one(ctx.conn.sql.last_inbound_msn, (ep.group_id, ep.handle))
    assert row is not None
    return ep.receive_seq if row[0] is None else max(ep.receive_seq, row[0] + 1)

def close(ctx: Context, ep: Endpoint) -> None:
    """Both sides have ended: delete ``ep`` (and a local peer that already ended)."""
    local_peer = load_peer(ctx.conn, ep)
    remote = local_peer is None and ep.far_broker_instance not in (
        None, ctx.catalog.broker_instance)
    keep = remote and not ep.is_initiator
    if not keep and local_peer is None and ep.is_initiator and not is_local(ctx, ep):
        # A remote initiator waits until its last message (EndDialog) is acknowledged; the
        # network layer deletes it then, delete_after bounds the wait.
        keep = ctx.conn.query_one(ctx.conn.sql.has_transmissions, (ep.handle,)) is not None
    if keep:
        # Keep the closed target for the anti-replay window, without its messages.
        delete_messages(ctx, ep)
        ctx.conn.execute(ctx.conn.sql.keep_closed_endpoint,
                         (ctx.now, ctx.now + ctx.anti_replay, NEVER, ep.handle))
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
    save_state(ctx, ep)
    delete_messages(ctx, ep)
    ctx.conn.execute(ctx.conn.sql.clear_timer, (ep.handle,))
    if Effect.SEND_END_DIALOG in effects:
        transmit(ctx, ep, m.END_DIALOG, b"")
    if Effect.SEND_ERROR in effects:
        drop_pending(ctx, ep)
        transmit(ctx, ep, m.ERROR, m.error_body(int(error or 0), description or ""))
    if Effect.CLOSE in effects and prior in ("DI", "ER") and not is_local(ctx, ep):
        transmit(ctx, ep, m.END_DIALOG, b"")  # a remote peer waits in DO for our end
    if Effect.CLOSE in effects:
        close(ctx, ep)

def drop_pending(ctx: Context, ep: Endpoint) -> None:
    """Drop ``ep``'s unsent messages; toward a remote peer they become empty placeholders
    (:data:`messages.DROPPED`) so that the sequence numbers the peer expects have no gap."""
    if is_local(ctx, ep):
        ctx.conn.execute(ctx.conn.sql.delete_pending_transmissions, (ep.handle,))
    else:
        ctx.conn.execute(ctx.conn.sql.drop_pending_transmissions, (m.DROPPED, ep.handle))

def apply_incoming(
    ctx: Context, ep: Endpoint, msn: int, mtype: str, body: bytes, message_id: str
) -> None:
    """A message from a remote peer, in order, for local endpoint ``ep`` (already checked):
    the state transition, receive_seq (always written), the queue row, the close."""
    event = {m.END_DIALOG: Event.PEER_END, m.ERROR: Event.PEER_ERROR}.get(mtype, Event.MESSAGE_IN)
    state, effects = transition(ep.state, event)
    ep.state = state.value
    ep.receive_seq = max(ep.receive_seq, msn + 1)
    save_state(ctx, ep)
    if Effect.ENQUEUE in effects:
        enqueue(ctx, ep, msn, mtype, body, message_id)
    if Effect.CLOSE in effects:
        close(ctx, ep)
