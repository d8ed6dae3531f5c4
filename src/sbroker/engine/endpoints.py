"""Conversation endpoints at commit time: the row, the context a committing transaction
carries, and the small operations everything else is built from (insert an endpoint, save its
state, put a message in a queue, delete an endpoint and its messages, where a far service
lives)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import astuple, dataclass, field
from typing import Any

from sbroker.core.catalog import Catalog
from sbroker.storage.ports import Connection

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

    def as_row(self) -> tuple[object, ...]:
        """The fields in order, as :func:`from_row` and ``Endpoint(*row)`` take them."""
        return (self.conv_order, self.handle, self.conversation_id, self.is_initiator,
                self.group_id, self.queue_id, self.service, self.far_service,
                self.far_broker_instance, self.contract, self.state, self.priority,
                self.send_seq, self.receive_seq, self.lifetime_expires, self.timer_at,
                self.created_at, self.encryption)

def from_row(row: tuple[object, ...] | None) -> Endpoint | None:
    """An endpoint from a row of its 18 columns; the two flags become bool before the
    endpoint is built (SQLite gives 0/1; compiled, the class checks its fields' types)."""
    if row is None:
        return None
    fields: list[Any] = list(row)  # the columns of endpoint_by_handle, in the fields' order
    fields[3] = bool(fields[3])
    fields[17] = bool(fields[17])
    return Endpoint(*fields)

def load_endpoint(conn: Connection, handle: str) -> Endpoint | None:
    return from_row(conn.query_one(conn.sql.endpoint_by_handle, (handle,)))

def load_peer(conn: Connection, ep: Endpoint) -> Endpoint | None:
    return from_row(conn.query_one(conn.sql.endpoint_by_conversation,
                                   (ep.conversation_id, int(not ep.is_initiator))))

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

def _no_peer(handle: str, peer: int, peer_queue: int) -> None:
    """Where a commit without a send path puts the local peers it sees conversing."""


@dataclass
class Sending:
    """What one commit's SENDs keep while they are applied (see dialogs.send_user_message):
    conversations numbered in memory (``fast``), sender rows read in one statement
    (``ready``: conversations the fast path can take from their first message; ``pre``: the
    others, whole), the endpoints the commit touched since, send_seq writes kept for flush,
    the peer the last delivery went to, and where a peer seen conversing is told (the
    backend's send path remembers it for the next commit's direct SEND)."""

    fast: dict[str, Fast] = field(default_factory=dict)
    ready: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    pre: dict[str, tuple[object, ...]] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)
    seqs: dict[str, tuple[int, int | None]] = field(default_factory=dict)  # (seq, rowid)
    last_peer: Endpoint | None = None
    learn: Callable[[str, int, int], None] = _no_peer

    def delivered_to(self) -> Endpoint | None:
        """The peer the last delivery went to (a method, so that a checker that saw
        ``last_peer`` set to None before the delivery does not take it for None after)."""
        return self.last_peer


@dataclass
class Context:
    """Everything commit-time code needs; collects the queues that got ready messages, the
    endpoints whose state changed or left, and message rows batched until flush."""

    conn: Connection
    catalog: Catalog
    now: float
    anti_replay: float = ANTI_REPLAY_SECONDS
    ready_queues: set[int] = field(default_factory=set)
    tq_changed: bool = False
    rows: list[tuple[object, ...]] = field(default_factory=list)
    changed: set[str] = field(default_factory=set)
    sending: Sending = field(default_factory=Sending)
    # The traceparent the messages written now carry (the SEND's, or a received message's).
    trace: str | None = None

def insert_endpoint(ctx: Context, ep: Endpoint) -> None:
    row = ctx.conn.query_one(ctx.conn.sql.insert_endpoint, astuple(ep)[1:])
    assert row is not None
    ep.conv_order = int(row[0])

def save_state(ctx: Context, ep: Endpoint) -> None:
    ctx.changed.add(ep.handle)
    ctx.conn.execute(ctx.conn.sql.save_endpoint_state,
                     (ep.state, ep.send_seq, ep.receive_seq, ep.handle))

def enqueue(
    ctx: Context, ep: Endpoint, msn: int, mtype: str, body: bytes, message_id: str,
    *, status: int = 1, is_timer: bool = False, defer: bool = False,
) -> None:
    """Insert a queue row (``defer``: batched until :func:`flush`, same commit)."""
    validation = ctx.catalog.message_types[mtype].validation_code if (
        mtype in ctx.catalog.message_types) else "N"
    row = (ep.queue_id, ep.group_id, ep.handle, ep.conv_order, msn, status, ep.priority,
           int(is_timer), mtype, validation, body, message_id, ep.service, ep.contract,
           ctx.now, ctx.trace)
    if defer:
        ctx.rows.append(row)
    else:
        ctx.conn.execute(ctx.conn.sql.insert_message, row)
    if status == 1:
        ctx.ready_queues.add(ep.queue_id)

def delete_endpoint(ctx: Context, ep: Endpoint) -> None:
    ctx.changed.add(ep.handle)
    delete_messages(ctx, ep)
    ctx.conn.execute(ctx.conn.sql.delete_endpoint_transmissions, (ep.handle,))
    ctx.conn.execute(ctx.conn.sql.delete_endpoint, (ep.handle,))

def delete_messages(ctx: Context, ep: Endpoint) -> None:
    """Delete the conversation's rows from its queue (found through the group index),
    counting them first."""
    sql = ctx.conn.sql
    ctx.conn.execute(sql.count_leaving_messages, (ep.queue_id, ep.group_id, ep.handle))
    ctx.conn.execute(sql.delete_conversation_messages, (ep.group_id, ep.handle))

def is_local(ctx: Context, ep: Endpoint) -> bool:
    """Whether the far service is served here (no explicit route sends it elsewhere)."""
    return is_local_to(ctx, ep.far_service, ep.far_broker_instance)

def is_local_to(ctx: Context, far_service: str, far_broker_instance: str | None) -> bool:
    if far_broker_instance not in (None, ctx.catalog.broker_instance):
        return False
    for route in ctx.catalog.routes:
        if route.service_name == far_service and route.address.startswith("tcp://") and (
            route.expires_at is None or route.expires_at > ctx.now
        ):
            return False
    return far_service in ctx.catalog.services

def has_route(ctx: Context, ep: Endpoint) -> bool:
    return any(
        (r.service_name in (None, ep.far_service))
        and r.address != "LOCAL"
        and (r.expires_at is None or r.expires_at > ctx.now)
        for r in ctx.catalog.routes
    )
