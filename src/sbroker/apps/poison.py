"""Poison-message handling for procedures (seed 004), for queues whose application handles
poison messages itself (``poison_message_handling=False``, or a threshold of at most 3 so
that the engine's five consecutive rollbacks never disable the queue first).

A failed attempt rolls back its transaction, so the incident is recorded afterwards in a
transaction of its own (table ``poison_message_details``).  When a conversation has more
incidents than ``threshold``, its next message is taken out of the queue and handled by the
policies, in the same transaction that records the removal in ``poison_messages``: nothing is
removed silently.  Logged, notified and parked messages keep their body and can be re-driven:
sent again from the conversation's other side (which must be in this database), so that they
arrive, after the messages already queued, in their own conversation.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sbroker.core.errors import (
    BrokerError,
    ConversationNotFoundError,
    InvalidArgumentError,
    NotFoundError,
    TransactionStateError,
)
from sbroker.engine import events
from sbroker.services.loop import ClockLoop
from sbroker.storage.sqlite.connector import rows_as_dicts

if TYPE_CHECKING:
    from sbroker.broker import Broker
    from sbroker.core.messages import Message
    from sbroker.engine.transaction import Transaction
    from sbroker.services.activation import ActivationContext

__all__ = [
    "ParkingService",
    "PoisonGuard",
    "Policy",
    "ensure_tables",
    "guarded",
    "install",
    "list_incidents",
    "list_messages",
    "redrive",
    "redrive_due",
]
log = logging.getLogger("sbroker.poison")
NOTIFIER = "sbroker/PoisonNotifier"
KINDS = ("drop", "end_conversation", "log", "notify", "park")
REDRIVABLE = ("logged", "notified", "parked")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS poison_message_details (incident_id INTEGER PRIMARY KEY,"
    " queue_name TEXT NOT NULL, conversation_handle TEXT NOT NULL, message_id TEXT,"
    " message_type_name TEXT, error TEXT, occurred_at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS ix_poison_message_details"
    " ON poison_message_details(conversation_handle)",
    "CREATE TABLE IF NOT EXISTS poison_messages (record_id INTEGER PRIMARY KEY,"
    " queue_name TEXT NOT NULL, conversation_handle TEXT NOT NULL, conversation_group_id TEXT,"
    " message_id TEXT, message_sequence_number INTEGER, message_type_name TEXT,"
    " service_name TEXT, service_contract_name TEXT, priority INTEGER, message_body BLOB,"
    " attempts INTEGER NOT NULL, last_error TEXT, policy TEXT NOT NULL, state TEXT NOT NULL,"
    " removed_at REAL NOT NULL, resend_at REAL, redriven_at REAL, redrive_error TEXT)",
    "CREATE INDEX IF NOT EXISTS ix_poison_messages_state ON poison_messages(state, resend_at)",
)
_ready: weakref.WeakSet[Broker] = weakref.WeakSet()
_services: weakref.WeakKeyDictionary[Broker, ParkingService] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


@dataclass(frozen=True)
class Policy:
    """What to do with a poison message; build one with the class methods."""

    kind: str
    error: int = 500
    description: str = "poison message removed from the queue"
    admin_service: str | None = None
    message_type: str = "DEFAULT"
    contract: str = "DEFAULT"
    delay: float = 60.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidArgumentError(f"unknown poison policy {self.kind!r}: use {KINDS}")
        if self.kind == "notify" and not self.admin_service:
            raise InvalidArgumentError("the notify policy needs admin_service")
        if self.delay < 0 or isinstance(self.error, bool) or self.error <= 0:
            raise InvalidArgumentError("delay must be >= 0 and error a positive int")

    @classmethod
    def drop(cls) -> Policy:
        """Delete the message (its removal is still recorded, without the body)."""
        return cls("drop")

    @classmethod
    def end_conversation(cls, error: int = 500, description: str | None = None) -> Policy:
        """End the conversation with an error the other side receives."""
        return cls("end_conversation", error=error,
                   description=description or cls.description)

    @classmethod
    def log(cls) -> Policy:
        """Keep the message in ``poison_messages`` for inspection and re-drive."""
        return cls("log")

    @classmethod
    def notify(cls, admin_service: str, *, message_type: str = "DEFAULT",
               contract: str = "DEFAULT") -> Policy:
        """Keep it, and send a JSON description to an administrator service."""
        return cls("notify", admin_service=admin_service, message_type=message_type,
                   contract=contract)

    @classmethod
    def park(cls, delay: float = 60.0) -> Policy:
        """Keep it in the holding table and re-send it into its conversation after ``delay``."""
        return cls("park", delay=float(delay))


LOG = Policy.log()


def ensure_tables(broker: Broker) -> None:
    """Create the incident and removal tables (idempotent)."""
    with _lock:
        if broker in _ready:
            return
    with broker.db.connection() as conn:
        for statement in _SCHEMA:
            conn.execute(statement)
    with _lock:
        _ready.add(broker)


class PoisonGuard:
    """Receives one message per transaction from ``queue`` and runs ``handler(tx, msg)``;
    a failure rolls back and counts an incident; above ``threshold`` the policies apply."""

    def __init__(self, broker: Broker, queue: str, *, threshold: int = 3,
                 policy: Policy | Sequence[Policy] = LOG) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise InvalidArgumentError("threshold must be an int >= 0")
        self.broker = broker
        self.queue = queue
        self.threshold = threshold
        self.policies = (policy,) if isinstance(policy, Policy) else tuple(policy)
        if not self.policies:
            raise InvalidArgumentError("give at least one poison policy")
        broker.catalog.queue(queue)
        ensure_tables(broker)
        if any(p.kind == "notify" for p in self.policies):
            events.prepare_sender(broker, NOTIFIER)
        if any(p.kind == "park" for p in self.policies):
            install(broker)

    def incidents(self, conversation_handle: str) -> int:
        """Failed attempts recorded for a conversation (since its last removal)."""
        with self.broker.db.connection() as conn:
            row = conn.execute("SELECT count(*) FROM poison_message_details"
                               " WHERE conversation_handle = ?", (conversation_handle,)).fetchone()
        return int(row[0])

    def process_one(self, handler: Callable[[Transaction, Message], object], *,
                    timeout: float | None = 0) -> bool:
        """Handle the next message; False when the queue had none."""
        msg: Message | None = None
        tx = self.broker.transaction()
        try:
            got = tx.receive(self.queue, top=1, timeout=timeout)
            if not got:
                tx.commit()
                return False
            msg = got[0]
            row = tx.execute("SELECT count(*) FROM poison_message_details"
                             " WHERE conversation_handle = ?", (msg.conversation_handle,))
            attempts = int(row.fetchone()[0])
            if attempts > self.threshold:
                record_id = self._remove(tx, msg, attempts)
            else:
                handler(tx, msg)
                record_id = None
            tx.commit()
        except Exception as exc:
            _rollback(tx)
            if msg is None:
                raise
            self.record_incident(msg, exc)
            return True
        except BaseException:
            _rollback(tx)
            raise
        if record_id is not None:
            self._after_removal(msg, record_id, attempts)
        return True

    def drain(self, handler: Callable[[Transaction, Message], object], *,
              timeout: float | None = 0, stopping: threading.Event | None = None) -> int:
        """Process until the queue is empty (or ``stopping`` is set); messages taken."""
        count = 0
        while not (stopping is not None and stopping.is_set()):
            if not self.process_one(handler, timeout=timeout):
                break
            count += 1
        return count

    def record_incident(self, msg: Message, exc: BaseException) -> None:
        """Record a failed attempt, in a transaction of its own."""
        error = f"{type(exc).__name__}: {exc}"
        with self.broker.transaction() as tx:
            tx.execute(
                "INSERT INTO poison_message_details(queue_name, conversation_handle, message_id,"
                " message_type_name, error, occurred_at) VALUES (?, ?, ?, ?, ?, ?)",
                (self.queue, msg.conversation_handle, msg.message_id, msg.message_type_name,
                 error, self.broker.clock.now()),
            )
        log.warning("message processing failed", extra={
            "queue": self.queue, "conversation_handle": msg.conversation_handle,
            "message_id": msg.message_id, "error": error})

    def _remove(self, tx: Transaction, msg: Message, attempts: int) -> int:
        kinds = [p.kind for p in self.policies]
        state = ("parked" if "park" in kinds else "ended" if "end_conversation" in kinds
                 else "notified" if "notify" in kinds else "logged" if "log" in kinds
                 else "dropped")
        now = self.broker.clock.now()
        park = next((p for p in self.policies if p.kind == "park"), None)
        last = tx.execute(
            "SELECT error FROM poison_message_details WHERE conversation_handle = ?"
            " ORDER BY incident_id DESC LIMIT 1", (msg.conversation_handle,)).fetchone()
        cur = tx.execute(
            "INSERT INTO poison_messages(queue_name, conversation_handle, conversation_group_id,"
            " message_id, message_sequence_number, message_type_name, service_name,"
            " service_contract_name, priority, message_body, attempts, last_error, policy, state,"
            " removed_at, resend_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (self.queue, msg.conversation_handle, msg.conversation_group_id, msg.message_id,
             msg.message_sequence_number, msg.message_type_name, msg.service_name,
             msg.service_contract_name, msg.priority,
             None if kinds == ["drop"] else msg.message_body, attempts,
             last[0] if last else None, "+".join(kinds), state, now,
             None if park is None else now + park.delay),
        )
        record_id = int(cur.lastrowid or 0)
        tx.execute("DELETE FROM poison_message_details WHERE conversation_handle = ?",
                   (msg.conversation_handle,))
        for p in self.policies:
            if p.kind == "end_conversation":
                tx.end_conversation(msg.conversation_handle, error=p.error,
                                    description=p.description)
            elif p.kind == "notify":
                assert p.admin_service is not None
                body = json.dumps({
                    "event": "POISON_MESSAGE", "record_id": record_id, "queue": self.queue,
                    "conversation_handle": msg.conversation_handle,
                    "message_id": msg.message_id, "message_type_name": msg.message_type_name,
                    "attempts": attempts, "last_error": last[0] if last else None,
                    "state": state,
                })
                events.send_shared(self.broker, tx, key=f"poison:{p.admin_service}",
                                   from_service=NOTIFIER, to_service=p.admin_service,
                                   contract=p.contract, message_type=p.message_type,
                                   body=body.encode())
        return record_id

    def _after_removal(self, msg: Message, record_id: int, attempts: int) -> None:
        log.error("poison message removed from the queue", extra={
            "queue": self.queue, "conversation_handle": msg.conversation_handle,
            "message_id": msg.message_id, "record_id": record_id, "attempts": attempts,
            "policy": "+".join(p.kind for p in self.policies)})
        if any(p.kind == "park" for p in self.policies):
            install(self.broker).wake()


def _rollback(tx: Transaction) -> None:
    with contextlib.suppress(TransactionStateError):  # it had committed: failed after
        tx.rollback()


def guarded(handler: Callable[[Transaction, Message], object], *, threshold: int = 3,
            policy: Policy | Sequence[Policy] = LOG) -> Callable[[ActivationContext], None]:
    """An activation procedure: drain the queue through a :class:`PoisonGuard`."""

    def procedure(ctx: ActivationContext) -> None:
        guard = PoisonGuard(ctx.broker, ctx.queue, threshold=threshold, policy=policy)
        guard.drain(handler, stopping=ctx.stopping)

    procedure.__qualname__ = f"guarded({getattr(handler, '__qualname__', 'handler')})"
    return procedure


# -- inspection and re-drive (the CLI calls these) ------------------------------------------
def list_messages(broker: Broker, *, queue: str | None = None,
                  state: str | None = None) -> list[dict[str, Any]]:
    """Removed poison messages, oldest first, optionally for one queue and/or state."""
    ensure_tables(broker)
    with broker.db.connection() as conn:
        return rows_as_dicts(conn.execute(
            "SELECT * FROM poison_messages WHERE (? IS NULL OR queue_name = ?)"
            " AND (? IS NULL OR state = ?) ORDER BY record_id", (queue, queue, state, state)))


def list_incidents(broker: Broker, *, queue: str | None = None) -> list[dict[str, Any]]:
    """Recorded failed attempts not yet resolved by a removal."""
    ensure_tables(broker)
    with broker.db.connection() as conn:
        return rows_as_dicts(conn.execute(
            "SELECT * FROM poison_message_details WHERE (? IS NULL OR queue_name = ?)"
            " ORDER BY incident_id", (queue, queue)))


def redrive(broker: Broker, record_id: int) -> str:
    """Send a logged/notified/parked message again into its conversation; the handle used.

    It is sent from the conversation's other endpoint, which must be in this database and
    still allow SEND; otherwise a :class:`BrokerError` says why and nothing changes.
    """
    ensure_tables(broker)
    with broker.transaction() as tx:
        cur = tx.execute(
            "UPDATE poison_messages SET state = 'redriven', redriven_at = ?, resend_at = NULL,"
            f" redrive_error = NULL WHERE record_id = ? AND state IN {REDRIVABLE!r}",
            (broker.clock.now(), record_id))
        row = tx.execute("SELECT state, conversation_handle, message_type_name, message_body"
                         " FROM poison_messages WHERE record_id = ?", (record_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"poison message record {record_id} does not exist")
        if cur.rowcount == 0:
            raise InvalidArgumentError(
                f"poison message record {record_id} is {row[0]}: only "
                f"{', '.join(REDRIVABLE)} messages can be re-driven")
        _, handle, message_type, body = row
        peer = tx.execute(
            "SELECT p.conversation_handle FROM conversation_endpoints e"
            " JOIN conversation_endpoints p ON p.conversation_id = e.conversation_id"
            " AND p.is_initiator != e.is_initiator WHERE e.conversation_handle = ?",
            (handle,)).fetchone()
        if peer is None:
            raise ConversationNotFoundError(
                f"cannot re-drive record {record_id}: conversation {handle} has ended, or its "
                "sending side is in another database")
        tx.send(peer[0], message_type, body)
    log.info("poison message re-driven", extra={
        "record_id": record_id, "conversation_handle": handle, "sent_on": peer[0]})
    return str(peer[0])


def redrive_due(broker: Broker) -> int:
    """Re-drive every parked message whose delay has passed; how many went back."""
    ensure_tables(broker)
    with broker.db.connection() as conn:
        due = [r[0] for r in conn.execute(
            "SELECT record_id FROM poison_messages WHERE state = 'parked'"
            " AND resend_at IS NOT NULL AND resend_at <= ? ORDER BY resend_at",
            (broker.clock.now(),))]
    done = 0
    for record_id in due:
        try:
            redrive(broker, record_id)
            done += 1
        except BrokerError as exc:
            log.error("parked message could not be re-driven", extra={
                "record_id": record_id, "error": str(exc)})
            with broker.transaction() as tx:
                tx.execute("UPDATE poison_messages SET resend_at = NULL, redrive_error = ?"
                           " WHERE record_id = ?", (str(exc), record_id))
    return done


class ParkingService(ClockLoop):
    """Re-sends parked messages when their delay has passed (runs while the broker is started)."""

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker.clock, "sbroker-poison-parking")
        self.broker = broker

    def run_once(self) -> float | None:
        redrive_due(self.broker)
        with self.broker.db.connection() as conn:
            row = conn.execute("SELECT min(resend_at) FROM poison_messages"
                               " WHERE state = 'parked' AND resend_at IS NOT NULL").fetchone()
        return None if row[0] is None else float(row[0])


def install(broker: Broker) -> ParkingService:
    """The broker's parking service, added (once) to its background services."""
    ensure_tables(broker)
    with _lock:
        service = _services.get(broker)
        if service is not None:
            return service
        service = _services[broker] = ParkingService(broker)
    broker.add_service(service)
    return service
