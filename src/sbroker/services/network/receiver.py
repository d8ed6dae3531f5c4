"""The listener's half: apply messages received from peer brokers to the local database.

A batch of in-order messages is applied in ONE write transaction (durable): find or create
the endpoint, drop duplicates by its receive_seq, validate, enqueue, advance receive_seq; or
store the message for forwarding; or refuse the conversation with a broker Error back to the
initiator. Only when that commit returns does the transport confirm the messages to the
protocol core, which then acknowledges them. Partial messages stay inside the protocol core
(they are never written to the queue), so status 2 rows never appear in the database.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from uuid import UUID

from sbroker.core import messages as m
from sbroker.core.conversation import State
from sbroker.core.priority import match_priority
from sbroker.engine import dialogs
from sbroker.engine.api import EngineAPI
from sbroker.engine.endpoints import (
    NEVER,
    Context,
    Endpoint,
    enqueue,
    from_row,
    insert_endpoint,
    load_endpoint,
)
from sbroker.protocol import DialogKey, Message
from sbroker.services.network import batch
from sbroker.services.network.routing import resolve
from sbroker.storage.ports import Connection

log = logging.getLogger("sbroker.network")
_CLOSING = (m.END_DIALOG, m.ERROR, m.DROPPED)


def uid(value: UUID | None) -> str | None:
    """The engine's form of a UUID: uppercase text."""
    return None if value is None else str(value).upper()


class ForwardLimitError(Exception):
    """The forwarding store is full: the peer retransmits later."""


class Receiver:
    """Applies received messages; ``forwarding``/``forward_bytes`` come from the endpoint."""

    def __init__(
        self, engine: EngineAPI, *, forwarding: bool, forward_bytes: int,
        on_outbox: Callable[[], None] = lambda: None,
        on_closed: Callable[[str, bool], None] = lambda conversation_id, direction: None,
    ) -> None:
        self.engine = engine
        self.forwarding = forwarding
        self.forward_bytes = forward_bytes
        self.on_outbox = on_outbox
        self.on_closed = on_closed
        self._closed: list[tuple[str, bool]] = []
        self.neighbors: set[UUID] = set()  # instances seen sending to us directly
        self._held: int | None = None

    # -- receive state --------------------------------------------------------------------
    def receive_state(self, key: DialogKey) -> int:
        """The durable next expected seq of a dialog direction (0 when never seen)."""
        conv = uid(key.conversation_id)
        with self.engine.store.read() as conn:
            row = conn.query_one(conn.sql.endpoint_receive_seq,
                                 (conv, int(not key.from_initiator)))
            if row is None:
                row = conn.query_one(conn.sql.inbound_next_seq, (conv, int(key.from_initiator)))
        return 0 if row is None else int(row[0])

    # -- applying a batch -----------------------------------------------------------------
    def deliver(self, peer: UUID, messages: list[Message]) -> None:
        """Durably apply ``messages`` (in order); raises to have them retransmitted later."""
        engine = self.engine
        outbox = [False]

        convs: dict[UUID, str] = {}
        for msg in messages:
            if msg.conversation_id not in convs:
                convs[msg.conversation_id] = str(msg.conversation_id).upper()

        def apply(conn: Connection) -> Context:
            self._held = None  # bytes held for forwarding, looked up once per batch
            self._closed = []
            ctx = engine.context(conn, max_age=0.05)
            endpoints = batch.load_endpoints(conn, {
                (convs[msg.conversation_id], not msg.from_initiator) for msg in messages})
            dirty: dict[str, Endpoint] = {}
            for msg in messages:
                if self._one(ctx, peer, msg, convs[msg.conversation_id], endpoints, dirty):
                    outbox[0] = True
            _flush(ctx, dirty)
            return ctx

        ctx = engine.store.commit_path.run(apply, durable=True)
        if any(msg.origin_instance == peer for msg in messages):
            self.neighbors.add(peer)
        engine.forget_endpoints(ctx.changed)
        engine.after_commit(ctx.ready_queues, False, ctx.tq_changed)
        if outbox[0] or ctx.tq_changed:
            self.on_outbox()
        for conversation_id, direction in self._closed:
            self.on_closed(conversation_id, direction)

    def _one(
        self, ctx: Context, peer: UUID, msg: Message, conv: str,
        endpoints: dict[tuple[str, bool], Endpoint | None], dirty: dict[str, Endpoint],
    ) -> bool:
        """Apply one message; True when it put something in the outbox.

        The common case (a valid user message on a conversing endpoint) is batched: queue
        rows in multi-row INSERTs and receive_seq written once per endpoint (``dirty``);
        anything else first writes what is batched, then takes the general path."""
        local_initiator = not msg.from_initiator
        cache_key = (conv, local_initiator)
        if cache_key in endpoints:
            ep = endpoints[cache_key]
        else:
            ep = from_row(ctx.conn.query_one(ctx.conn.sql.endpoint_by_conversation,
                                                     (conv, int(local_initiator))))
        if ep is None and self._for_elsewhere(ctx, msg):
            return self._forward(ctx, conv, msg)
        if ep is None:
            created = self._new_endpoint(ctx, peer, conv, msg)
            if not isinstance(created, Endpoint):
                return created
            ep = created
        endpoints[cache_key] = ep
        if msg.seq < ep.receive_seq:
            return False
        if ep.far_broker_instance is None:
            ep.far_broker_instance = uid(msg.origin_instance or peer)
            ctx.conn.execute(ctx.conn.sql.set_far_broker_instance,
                             (ep.far_broker_instance, ep.handle))
        if msg.message_type == m.DROPPED:
            _flush(ctx, dirty)
            ep.receive_seq = msg.seq + 1
            ctx.conn.execute(ctx.conn.sql.set_receive_seq, (ep.receive_seq, ep.handle))
            return False
        ctx.trace = msg.trace_context  # stored with the queue row (SPEC §15)
        problem = self._check(ctx, msg)
        if problem is None and ep.state == "CO" and msg.message_type not in m.SYSTEM_MESSAGE_TYPES:
            ep.receive_seq = msg.seq + 1
            dirty[ep.handle] = ep
            enqueue(ctx, ep, msg.seq, msg.message_type, msg.body, m.new_id(), defer=True)
            return False
        _flush(ctx, dirty)
        if problem is not None and ep.state in ("SO", "SI", "CO"):
            code, text = problem
            ep.receive_seq = msg.seq + 1
            dialogs.end(ctx, ep, code, text, False)  # Error back to the sender, we are DO
            endpoints[cache_key] = load_endpoint(ctx.conn, ep.handle)
            return True
        if problem is not None:
            ep.receive_seq = msg.seq + 1
            ctx.conn.execute(ctx.conn.sql.set_receive_seq, (ep.receive_seq, ep.handle))
            return False
        dialogs.apply_incoming(ctx, ep, msg.seq, msg.message_type, msg.body, m.new_id())
        if msg.message_type in (m.END_DIALOG, m.ERROR):
            endpoints.pop(cache_key, None)  # it may have been closed or deleted
            if ep.state == "CD":  # this direction is over: its protocol state can go
                self._closed.append((conv, msg.from_initiator))
        return False

    @staticmethod
    def _check(ctx: Context, msg: Message) -> tuple[int, str] | None:
        """A broker error for a message the local catalog cannot accept, else None."""
        mt = ctx.catalog.message_types.get(msg.message_type)
        if mt is None:
            return m.UNKNOWN_MESSAGE_TYPE, (
                f"The message type {msg.message_type!r} is not defined in the target database.")
        reason = mt.check(msg.body)
        if reason is not None:
            return m.VALIDATION_FAILED, (
                f"A message of type {msg.message_type!r} failed validation: {reason}")
        return None

    # -- first messages -------------------------------------------------------------------
    def _new_endpoint(
        self, ctx: Context, peer: UUID, conv: str, msg: Message
    ) -> Endpoint | bool:
        """The target endpoint a first message creates, or False when it is dropped/refused."""
        row = ctx.conn.query_one(ctx.conn.sql.inbound_state, (conv, int(msg.from_initiator)))
        if row is not None and row[1]:  # refused earlier: the rest of it is dropped
            if msg.seq >= row[0]:
                self._set_inbound(ctx, conv, msg, refused=True)
            return False
        if not msg.from_initiator or msg.message_type in _CLOSING:
            return False  # the local side is gone, or it ended before we ever heard of it
        origin = uid(msg.origin_instance or peer)
        service = ctx.catalog.services.get(msg.to_service)
        if service is None or msg.contract not in service.contracts:
            # A refusal is final: judge it by the catalog as committed now, not a snapshot
            # that may predate the service (another process's DDL, or one a moment ago).
            ctx.catalog = self.engine.catalog(ctx.conn)
            service = ctx.catalog.services.get(msg.to_service)
        if service is None:
            return self._refuse(ctx, conv, msg, origin, m.TARGET_SERVICE_NOT_FOUND,
                                f"The target service name {msg.to_service!r} could not be found"
                                " in the target broker instance.")
        if msg.contract not in service.contracts:
            return self._refuse(ctx, conv, msg, origin, m.CONTRACT_NOT_SUPPORTED,
                                f"The target service {service.name!r} does not support contract"
                                f" {msg.contract!r}.")
        ep = Endpoint(
            conv_order=None, handle=m.new_id(), conversation_id=conv, is_initiator=False,
            group_id=m.new_id(), queue_id=service.queue_id, service=service.name,
            far_service=msg.from_service, far_broker_instance=origin, contract=msg.contract,
            state=State.SI.value,
            priority=match_priority(
                ctx.catalog.priorities, msg.contract, service.name, msg.from_service),
            send_seq=0, receive_seq=0,
            lifetime_expires=NEVER if msg.expires_at is None else msg.expires_at,
            timer_at=None, created_at=ctx.now,
        )
        insert_endpoint(ctx, ep)
        if ep.lifetime_expires < NEVER:
            ctx.tq_changed = True  # (ab)used to wake the timer service for this lifetime
        return ep

    def _refuse(
        self, ctx: Context, conv: str, msg: Message, origin: str | None, code: int, text: str
    ) -> bool:
        """Record the refusal (anti-replay) and send a broker Error back to the initiator."""
        self._set_inbound(ctx, conv, msg, refused=True)
        ctx.conn.execute(
            ctx.conn.sql.insert_outbox,
            (conv, 0, 0, msg.to_service, msg.from_service, msg.contract, m.ERROR,
             m.error_body(code, text), 5, ctx.catalog.broker_instance, origin, None, ctx.now),
        )
        return True

    def _set_inbound(self, ctx: Context, conv: str, msg: Message, *, refused: bool) -> None:
        ctx.conn.execute(
            ctx.conn.sql.save_inbound,
            (conv, int(msg.from_initiator), msg.seq + 1, int(refused),
             ctx.now + ctx.anti_replay),
        )

    # -- forwarding -----------------------------------------------------------------------
    def _for_elsewhere(self, ctx: Context, msg: Message) -> bool:
        """Whether a message with no local endpoint is to be relayed (forwarding on)."""
        if not self.forwarding:
            return False
        me = ctx.catalog.broker_instance
        target = uid(msg.target_instance)
        if target == me:
            return False
        res = resolve(ctx.catalog.routes, me=me, local_services=ctx.catalog.services,
                      to_service=msg.to_service, to_instance=target, now=ctx.now)
        return res.kind == "remote"

    def _forward(self, ctx: Context, conv: str, msg: Message) -> bool:
        row = ctx.conn.query_one(ctx.conn.sql.inbound_next_seq, (conv, int(msg.from_initiator)))
        if row is not None and msg.seq < row[0]:
            return False
        if self._held is None:
            held = ctx.conn.query_one(ctx.conn.sql.outbox_bytes)
            assert held is not None
            self._held = int(held[0])
        if self._held + len(msg.body) > self.forward_bytes:
            raise ForwardLimitError("message_forward_size reached: forwarding waits")
        self._held += len(msg.body)
        self._set_inbound(ctx, conv, msg, refused=False)
        ctx.conn.execute(
            ctx.conn.sql.insert_outbox,
            (conv, int(msg.from_initiator), msg.seq, msg.from_service, msg.to_service,
             msg.contract, msg.message_type, msg.body, 5, uid(msg.origin_instance),
             uid(msg.target_instance), msg.expires_at, ctx.now),
        )
        return True


def _flush(ctx: Context, dirty: dict[str, Endpoint]) -> None:
    """Write the batched queue rows and receive sequence numbers."""
    batch.insert_messages(ctx.conn, ctx.rows)
    ctx.rows.clear()
    dialogs.flush(ctx)
    if dirty:
        batch.set_receive_seqs(ctx.conn, {h: ep.receive_seq for h, ep in dirty.items()})
        dirty.clear()
