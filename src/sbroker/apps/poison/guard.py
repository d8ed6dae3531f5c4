"""Poison-message handling for procedures (docs/poison.md), for queues whose application handles
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

from sbroker.apps.sql import read, read_dicts, statements
from sbroker.core.errors import (
    BrokerError,
    ConversationNotFoundError,
    DuplicateError,
    InvalidArgumentError,
    NotFoundError,
    TransactionStateError,
)
from sbroker.engine.api import BrokerAPI
from sbroker.services.loop import ClockLoop
from sbroker.storage.queries import Queries

if TYPE_CHECKING:
    from sbroker.core.messages import Message
    from sbroker.engine.transaction import Transaction
    from sbroker.services.activation import ActivationContext

__all__ = [
    "REDRIVABLE",
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
_services: weakref.WeakKeyDictionary[Any, ParkingService] = weakref.WeakKeyDictionary()
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


def _sql(broker: BrokerAPI) -> Queries:
    return statements(broker, "sbroker.apps.poison")


def ensure_tables(broker: BrokerAPI) -> None:
    """Kept for callers of earlier releases: the tables come with every database now."""


def _ensure_sender(broker: BrokerAPI, service: str) -> None:
    """The hidden queue and service (both ``service``) the notify policy sends from."""
    cat = broker.catalog
    with contextlib.suppress(DuplicateError):
        if service not in cat.queues:
            broker.create_queue(service, poison_message_handling=False)
    with contextlib.suppress(DuplicateError):
        if service not in cat.services:
            broker.create_service(service, service)


class PoisonGuard:
    """Receives one message per transaction from ``queue`` and runs ``handler(tx, msg)``;
    a failure rolls back and counts an incident; above ``threshold`` the policies apply."""

    def __init__(self, broker: BrokerAPI, queue: str, *, threshold: int = 3,
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
        self._sql = _sql(broker)
        if any(p.kind == "notify" for p in self.policies):
            _ensure_sender(broker, NOTIFIER)
        if any(p.kind == "park" for p in self.policies):
            install(broker)

    def incidents(self, conversation_handle: str) -> int:
        """Failed attempts recorded for a conversation (since its last removal)."""
        [row] = read(self.broker, self._sql.incidents_of, (conversation_handle,))
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
            row = tx.execute(self._sql.incidents_of, (msg.conversation_handle,))
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
                self._sql.record_incident,
                (self.queue, msg.conversation_handle, msg.message_id, msg.message_type_name,
                 error, self.broker.clock.now()),
            )
        log.warning("message processing failed on queue %s (conversation %s, message %s): %s",
                    self.queue, msg.conversation_handle, msg.message_id, error, extra={
            "queue": self.queue, "conversation_handle": msg.conversation_handle,
            "message_id": msg.message_id, "error": error})

    def _remove(self, tx: Transaction, msg: Message, attempts: int) -> int:
        kinds = [p.kind for p in self.policies]
        state = ("parked" if "park" in kinds else "ended" if "end_conversation" in kinds
                 else "notified" if "notify" in kinds else "logged" if "log" in kinds
                 else "dropped")
        now = self.broker.clock.now()
        park = next((p for p in self.policies if p.kind == "park"), None)
        last = tx.execute(self._sql.last_incident_error, (msg.conversation_handle,)).fetchone()
        cur = tx.execute(
            self._sql.record_removal,
            (self.queue, msg.conversation_handle, msg.conversation_group_id, msg.message_id,
             msg.message_sequence_number, msg.message_type_name, msg.service_name,
             msg.service_contract_name, msg.priority,
             None if kinds == ["drop"] else msg.message_body, attempts,
             last[0] if last else None, "+".join(kinds), state, now,
             None if park is None else now + park.delay),
        )
        record_id = int(cur.fetchone()[0])
        tx.execute(self._sql.forget_incidents, (msg.conversation_handle,))
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
                tx.send_shared(key=f"poison:{p.admin_service}", from_service=NOTIFIER,
                               to_service=p.admin_service, contract=p.contract,
                               message_type=p.message_type, body=body.encode())
        return record_id

    def _after_removal(self, msg: Message, record_id: int, attempts: int) -> None:
        policy = "+".join(p.kind for p in self.policies)
        log.error("poison message removed from the queue %s after %d attempts (%s; record"
                  " %d, conversation %s, message %s)", self.queue, attempts, policy, record_id,
                  msg.conversation_handle, msg.message_id, extra={
            "queue": self.queue, "conversation_handle": msg.conversation_handle,
            "message_id": msg.message_id, "record_id": record_id, "attempts": attempts,
            "policy": policy})
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
def list_messages(broker: BrokerAPI, *, queue: str | None = None,
                  state: str | None = None) -> list[dict[str, Any]]:
    """Removed poison messages, oldest first, optionally for one queue and/or state."""
    return read_dicts(broker, _sql(broker).list_messages, (queue, queue, state, state))


def list_incidents(broker: BrokerAPI, *, queue: str | None = None) -> list[dict[str, Any]]:
    """Recorded failed attempts not yet resolved by a removal."""
    return read_dicts(broker, _sql(broker).list_incidents, (queue, queue))


def redrive(broker: BrokerAPI, record_id: int) -> str:
    """Send a logged/notified/parked message again into its conversation; the handle used.

    It is sent from the conversation's other endpoint, which must be in this database and
    still allow SEND; otherwise a :class:`BrokerError` says why and nothing changes.
    """
    sql = _sql(broker)
    with broker.transaction() as tx:
        cur = tx.execute(sql.mark_redriven, (broker.clock.now(), record_id))
        row = tx.execute(sql.removal, (record_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"poison message record {record_id} does not exist")
        if cur.rowcount == 0:
            raise InvalidArgumentError(
                f"poison message record {record_id} is {row[0]}: only "
                f"{', '.join(REDRIVABLE)} messages can be re-driven")
        _, handle, message_type, body = row
        peer = tx.execute(sql.peer_handle, (handle,)).fetchone()
        if peer is None:
            raise ConversationNotFoundError(
                f"cannot re-drive record {record_id}: conversation {handle} has ended, or its "
                "sending side is in another database")
        tx.send(peer[0], message_type, body)
    log.info("poison message re-driven", extra={
        "record_id": record_id, "conversation_handle": handle, "sent_on": peer[0]})
    return str(peer[0])


def redrive_due(broker: BrokerAPI) -> int:
    """Re-drive every parked message whose delay has passed; how many went back."""
    sql = _sql(broker)
    due = [r[0] for r in read(broker, sql.parked_due, (broker.clock.now(),))]
    done = 0
    for record_id in due:
        try:
            redrive(broker, record_id)
            done += 1
        except BrokerError as exc:
            log.error("parked message %d could not be re-driven: %s", record_id, exc, extra={
                "record_id": record_id, "error": str(exc)})
            with broker.transaction() as tx:
                tx.execute(sql.redrive_failed, (str(exc), record_id))
    return done


class ParkingService(ClockLoop):
    """Re-sends parked messages when their delay has passed (runs while the broker is started)."""

    def __init__(self, broker: BrokerAPI) -> None:
        super().__init__(broker.clock, "sbroker-poison-parking")
        self.broker = broker

    def run_once(self) -> float | None:
        redrive_due(self.broker)
        [row] = read(self.broker, _sql(self.broker).next_parked)
        return None if row[0] is None else float(row[0])


def install(broker: BrokerAPI) -> ParkingService:
    """The broker's parking service, added (once) to its background services."""
    with _lock:
        service = _services.get(broker)
        if service is not None:
            return service
        service = _services[broker] = ParkingService(broker)
    broker.add_service(service)
    return service
