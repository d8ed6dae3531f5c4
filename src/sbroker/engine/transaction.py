"""A broker transaction: its statements (docs/concepts.md, "Transactions and their
statements").

Statements check their arguments at once and record what they will do (:mod:`ops`); COMMIT
applies it all in one short write transaction of the store.  RECEIVE (:mod:`receive`) locks a
conversation group through the store's transaction storage, so that a transaction holding a
group for minutes does not block the database meanwhile.  ``execute`` is the exception: an
application write statement holds the store's write transaction until the end, so that it
commits or rolls back together with the broker effects.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, TypeVar

from sbroker.core import messages as m
from sbroker.core.catalog import Catalog
from sbroker.core.conversation import AFTER_SEND, Event, State, transition
from sbroker.core.errors import (
    BrokerError,
    CommitConflictError,
    ContractViolationError,
    ConversationNotFoundError,
    ConversationStateError,
    InvalidArgumentError,
    NotFoundError,
    TransactionStateError,
)
from sbroker.core.priority import match_priority
from sbroker.engine import dialogs, stopping
from sbroker.engine.abandon import Leftovers
from sbroker.engine.commit import Commit
from sbroker.engine.endpoints import Context, Endpoint, load_endpoint
from sbroker.engine.host import Host
from sbroker.engine.ops import Begin, End, Move, Op, Send, Timer
from sbroker.engine.receive import Receiving, check_timeout, normalize_handle
from sbroker.engine.shared import send_shared
from sbroker.storage.ports import Connection, Cursor

CATALOG_MAX_AGE = 0.05  # see engine.CATALOG_MAX_AGE
MAX_LIFETIME = 2**31 - 1
T = TypeVar("T")
_owners = itertools.count(1)


def _is_read_only(sql: str) -> bool:
    words = sql.lstrip().split(None, 1)
    return bool(words) and words[0].upper() in ("SELECT", "VALUES")


class Rows:
    """What ``tx.execute`` returns, whatever the backend: rows, ``rowcount``, ``lastrowid``
    (SQLite only; use RETURNING on PostgreSQL), ``description``."""

    def __init__(self, cursor: Cursor) -> None:
        self._cursor = cursor
        self.rowcount: int = cursor.rowcount
        self.lastrowid: int | None = getattr(cursor, "lastrowid", None)
        self.description: Any = cursor.description

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    def __iter__(self) -> Any:
        return iter(self._cursor)


class Transaction(Receiving):
    """``with broker.transaction() as tx:`` — commits on normal exit, rolls back on error."""

    def __init__(self, engine: Host) -> None:
        self._engine = engine
        self._owner = f"{engine.session_id}:{next(_owners)}"
        self._storage = engine.store.tx_storage(self._owner, engine.session_id,
                                                engine.clock.now)
        self._catalog: Catalog | None = None
        self._ops: list[Op] = []
        self._eps: dict[str, Endpoint] = {}
        self._gone: set[str] = set()
        # queuing_order -> (queue, retention, message_id): rowids can be reused after deletes,
        # so the message id makes sure COMMIT deletes the very row that was received.
        self._received: dict[int, tuple[int, bool, str]] = {}
        self._received_queues: set[int] = set()
        self._state = "active"
        self._left: Leftovers | None = None  # set once it holds locks or the writer

    def _watch(self) -> None:
        """Make sure a drop without COMMIT or ROLLBACK gives back what this one holds."""
        if self._left is None:
            self._left = self._engine.abandoned.watch(self, self._storage,
                                                      self._received_queues)

    # -- context manager ---------------------------------------------------------------------
    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._state != "active":
            return
        if exc_type is None:
            self.commit()
        else:
            self.rollback()

    # -- plumbing -----------------------------------------------------------------------------
    def _check_active(self) -> None:
        if self._state != "active":
            raise TransactionStateError(
                f"the transaction has {self._state}: start a new one with broker.transaction()"
            )

    def _c(self) -> Connection:
        return self._storage.reader()

    def _cat(self, refresh: bool = False, *, again: bool = False) -> Catalog:
        """The catalog this transaction's statements check against: its snapshot, taken
        from the engine's (checked against the database at most every CATALOG_MAX_AGE
        seconds); ``again``: the engine's once more (a RECEIVE that waited); ``refresh``:
        checked against the database now."""
        if self._catalog is None or refresh or again:
            catalogs = self._engine.catalogs
            self._catalog = (None if refresh else catalogs.fresh(CATALOG_MAX_AGE)) or \
                catalogs.get(self._c(), max_age=0.0 if refresh else CATALOG_MAX_AGE)
        return self._catalog

    def _lookup(self, fn: Callable[[Catalog], T]) -> T:
        """``fn(catalog)``, looking again at the database when a name is missing from a
        snapshot that may be a few ms old (another process may have just created it)."""
        try:
            return fn(self._cat())
        except NotFoundError:
            return fn(self._cat(refresh=True))

    def _endpoint(self, handle: object, *, fresh: bool = False) -> Endpoint:
        """The endpoint as this transaction sees it.  ``fresh=False`` may use the engine's
        snapshot (state and contract, for SEND's checks: COMMIT re-reads the row); statements
        that depend on the endpoint's current group pass ``fresh=True``."""
        eps, engine = self._eps, self._engine
        cache = engine.endpoint_cache
        if isinstance(handle, str) and (handle in eps or handle in cache):
            key = handle  # a handle we have seen is already in canonical form
        else:
            key = normalize_handle(handle)
        if key in self._gone:
            raise ConversationNotFoundError(f"the conversation handle {key} is not found")
        ep = eps.get(key)
        if ep is not None and (not fresh or ep.conv_order is None):
            return ep  # seen in this transaction (conv_order None: begun in it)
        if ep is None and not fresh:
            cached = cache.get(key)
            if cached is not None:
                ep = eps[key] = Endpoint(*cached)
                return ep
        loaded = load_endpoint(self._c(), key)
        if loaded is None:
            raise ConversationNotFoundError(f"the conversation handle {key} is not found")
        engine.remember_endpoint(loaded)
        if ep is not None:
            loaded.state = ep.state  # keep this transaction's own state changes
        self._eps[key] = loaded
        return loaded

    def conversation_id(self, handle: object) -> str:
        """The conversation (both endpoints share it) of a conversation handle."""
        self._check_active()
        return self._endpoint(handle).conversation_id

    # -- dialogs ------------------------------------------------------------------------------
    def begin_dialog(self, from_service: str, to_service: str, contract: str = m.DEFAULT, *,
                     broker_instance: str | None = None, related_conversation: object = None,
                     related_conversation_group: object = None, lifetime: float | None = None,
                     encryption: bool = True) -> str:
        """Create the initiator endpoint of a new dialog; returns its conversation handle."""
        self._check_active()
        service = self._lookup(lambda c: c.service(from_service))
        if not isinstance(to_service, str) or not to_service:
            raise InvalidArgumentError(f"to_service must be a service name, got {to_service!r}")
        self._lookup(lambda c: c.contract(contract))
        cat = self._cat()
        if broker_instance is not None and not isinstance(broker_instance, str):
            raise InvalidArgumentError("broker_instance must be a string (a UUID) or None")
        if related_conversation is not None and related_conversation_group is not None:
            raise InvalidArgumentError(
                "give related_conversation or related_conversation_group, not both"
            )
        if lifetime is None:
            lifetime = MAX_LIFETIME
        if isinstance(lifetime, bool) or not isinstance(lifetime, (int, float)) or not (
            0 < lifetime <= MAX_LIFETIME
        ):
            raise InvalidArgumentError(
                f"lifetime must be seconds from 1 to {MAX_LIFETIME}, got {lifetime!r}"
            )
        group = m.new_id()
        if related_conversation is not None:
            related = self._endpoint(related_conversation, fresh=True)
            if related.queue_id != service.queue_id:
                raise InvalidArgumentError(
                    "related_conversation belongs to another queue than the service "
                    f"{from_service!r} uses"
                )
            group = related.group_id
        elif related_conversation_group is not None:
            group = normalize_handle(related_conversation_group)
            conn = self._c()
            row = conn.query_one(conn.sql.queue_of_group, (group,))
            if row is not None and row[0] != service.queue_id:
                raise InvalidArgumentError(
                    f"conversation group {group} belongs to another queue than the service "
                    f"{from_service!r} uses"
                )
        now = self._engine.clock.now()
        ep = Endpoint(
            conv_order=None, handle=m.new_id(), conversation_id=m.new_id(), is_initiator=True,
            group_id=group, queue_id=service.queue_id, service=from_service,
            far_service=to_service, far_broker_instance=broker_instance, contract=contract,
            state=State.SO.value,
            priority=match_priority(cat.priorities, contract, from_service, to_service),
            send_seq=0, receive_seq=0, lifetime_expires=now + lifetime, timer_at=None,
            created_at=now, encryption=bool(encryption),
        )
        self._eps[ep.handle] = ep
        self._ops.append(Begin(replace(ep)))
        return ep.handle

    def send(self, handle_or_handles: object, message_type: str = m.DEFAULT,
             body: bytes | str = b"") -> None:
        """SEND one message on one or several conversations (all or none)."""
        if self._state != "active":
            self._check_active()
        if isinstance(handle_or_handles, (str, uuid.UUID)):
            handles: Sequence[object] = (handle_or_handles,)
        elif isinstance(handle_or_handles, Iterable):
            handles = tuple(handle_or_handles)
            if not handles:
                raise InvalidArgumentError("send needs at least one conversation handle")
        else:
            raise InvalidArgumentError(
                f"send needs a conversation handle or a list of them, got {handle_or_handles!r}"
            )
        if type(body) is bytes:
            data = body
        elif body is None:
            raise InvalidArgumentError("the message body is None: send b'' for an empty body")
        elif isinstance(body, str):
            data = body.encode("utf-8")
        elif isinstance(body, (bytes, bytearray, memoryview)):
            data = bytes(body)
        else:
            raise InvalidArgumentError(
                f"the message body must be bytes or str, not {type(body).__name__}"
            )
        if not isinstance(message_type, str):
            raise InvalidArgumentError(f"message_type must be a name, got {message_type!r}")
        cat = self._catalog or self._cat()
        if message_type not in cat.message_types:
            cat = self._cat(refresh=True)
            if message_type not in cat.message_types:
                raise NotFoundError(f"message type {message_type!r} does not exist", 8430)
        if len(handles) == 1:
            ep = self._endpoint(handles[0])
            _check_send(cat, ep, message_type)
            ep.state = AFTER_SEND[ep.state]
            sent: tuple[str, ...] = (ep.handle,)
        else:
            eps = [self._endpoint(h) for h in handles]
            for ep in eps:
                _check_send(cat, ep, message_type)
            for ep in eps:
                ep.state = AFTER_SEND[ep.state]
            ep, sent = eps[0], tuple(ep.handle for ep in eps)
        trace = self._engine.instrumentation.send(message_type, ep.far_service,
                                                  ep.conversation_id, ep.group_id, sent)
        self._ops.append(Send(sent, message_type, data, trace))

    def end_conversation(self, handle: object, *, error: int | None = None,
                         description: str | None = None, cleanup: bool = False) -> None:
        """END CONVERSATION, WITH ERROR (positive code + description), or WITH CLEANUP."""
        self._check_active()
        if error is not None and (
            isinstance(error, bool) or not isinstance(error, int) or error <= 0
        ):
            raise InvalidArgumentError(f"error must be a positive int, got {error!r}")
        if description is not None and not isinstance(description, str):
            raise InvalidArgumentError("description must be a string")
        if description is not None and error is None:
            raise InvalidArgumentError("description goes with error=: give both or neither")
        if cleanup and error is not None:
            raise InvalidArgumentError("cleanup=True cannot be combined with error=")
        ep = self._endpoint(handle)
        if cleanup:
            self._gone.add(ep.handle)
        else:
            event = Event.END if error is None else Event.END_WITH_ERROR
            ep.state = transition(ep.state, event)[0].value
        self._ops.append(End(ep.handle, error, description, bool(cleanup)))

    def begin_conversation_timer(self, handle: object, timeout: float) -> None:
        """Set (or reset) the endpoint's timer: a DialogTimer message arrives after ``timeout``."""
        self._check_active()
        seconds = check_timeout(timeout)
        if seconds is None:
            raise InvalidArgumentError("a conversation timer needs a timeout in seconds")
        ep = self._endpoint(handle)
        if ep.state == State.CD.value:
            raise ConversationStateError(f"the conversation {ep.handle} is closed")
        self._ops.append(Timer(ep.handle, self._engine.clock.now() + seconds))

    def move_conversation(self, handle: object, conversation_group_id: object) -> None:
        """Move a conversation (and its queued messages) to another group of the same queue."""
        self._check_active()
        ep = self._endpoint(handle, fresh=True)
        group = normalize_handle(conversation_group_id)
        conn = self._c()
        row = conn.query_one(conn.sql.queue_of_group, (group,))
        if row is None:
            raise NotFoundError(f"conversation group {group} does not exist", 8418)
        if row[0] != ep.queue_id:
            raise InvalidArgumentError(
                f"conversation group {group} belongs to another queue: moves stay in one queue"
            )
        # Like MOVE CONVERSATION, lock both groups: moving messages another transaction has
        # received (or is receiving into) would hand them to a second reader.
        self._watch()
        if not self._storage.lock(ep.queue_id, (ep.group_id, group)):
            raise CommitConflictError(
                f"cannot move conversation {ep.handle}: its group {ep.group_id} or group "
                f"{group} is locked by another transaction", 1205,
            )
        ep.group_id = group
        self._ops.append(Move(ep.handle, group))

    def send_shared(self, *, key: str, from_service: str, to_service: str, contract: str,
                    message_type: str, body: bytes) -> str:
        """SEND on the dialog kept under ``key`` (begun on first use, begun again when the
        far side ended it): one dialog for a stream of notices, as event notifications use.
        ``from_service`` must exist already.  Returns the dialog's handle."""
        return send_shared(self._engine, self, key=key, from_service=from_service,
                                  to_service=to_service, contract=contract,
                                  message_type=message_type, body=body)

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Rows:
        """An application statement in the same database, atomic with this transaction."""
        self._check_active()
        if not isinstance(sql, str):
            raise InvalidArgumentError("execute needs an SQL string")
        if not self._storage.held and not _is_read_only(sql):
            self._watch()
            self._storage.hold()
        try:
            return Rows(self._c().execute(sql, params))
        except self._engine.store.errors as exc:  # the driver's error, whatever the backend
            raise BrokerError(f"application statement failed: {exc}") from exc

    # -- ending ---------------------------------------------------------------------------------
    def commit(self) -> None:
        """Make every effect of the transaction durable at once."""
        self._check_active()
        self._state = "committed"
        storage, ops = self._storage, self._ops
        locks = storage.locks
        if not (ops or self._received or locks or storage.held):
            self._release()
            return
        engine = self._engine
        ctx = Context(None, self._cat(), engine.clock.now(), engine.anti_replay)  # type: ignore[arg-type]
        work = Commit(engine.catalogs, engine.store.sends, ops, self._eps,
                      alone=not (self._received or locks or storage.held))

        def apply(conn: Connection) -> None:
            ctx.conn = conn
            ctx.ready_queues.clear()
            # Received rows first: a conversation this transaction also ends then counts
            # them as received, not removed unreceived.
            if self._received:
                self._finish_receives(conn)
            work.apply(ctx)

        released: set[int] | bool = set(locks.values()) if locks else False
        try:
            storage.commit(apply, received=bool(self._received), changed=bool(ops))
            if work.wrote_nothing():
                # The direct SEND wrote nothing and the commit did nothing else: it is made
                # again the ordinary way.
                storage.commit(apply, received=False, changed=True)
        except BaseException as exc:
            self._state = "active"
            self.rollback()
            if isinstance(exc, engine.store.errors):
                raise BrokerError(f"commit failed: {exc}") from exc
            raise
        timers = work.timers
        if ctx.changed:
            engine.forget_endpoints(ctx.changed)
        if work.others:
            engine.forget_endpoints(op.handle for op in ops if isinstance(op, (End, Move)))
        self._release()
        engine.after_commit(ctx.ready_queues, released, timers or ctx.tq_changed,
                            transmitted=ctx.tq_changed)

    def _finish_receives(self, conn: Connection) -> None:
        taken: dict[int, list[tuple[int, str]]] = {}
        kept: list[tuple[int, str]] = []
        for qo, (queue_id, keep, mid) in self._received.items():
            if keep:
                kept.append((qo, mid))
            else:
                taken.setdefault(queue_id, []).append((qo, mid))
        for queue_id, rows in taken.items():
            self._engine.store.consume(conn, rows, queue_id)
        if kept:
            conn.executemany(conn.sql.retain_received, kept)
        reset = conn.sql.reset_rollback_count
        for queue_id in self._received_queues:
            conn.execute(reset, (queue_id,))

    def rollback(self) -> None:
        """Undo every effect; received messages become receivable again."""
        if self._state == "rolled back":
            return
        if self._state == "committed":
            raise TransactionStateError("the transaction has already committed")
        self._state = "rolled back"
        disabled: list[int] = []
        released = set(self._storage.locks.values())
        try:
            # A procedure stopped with its broker rolls back because of the stop, not of a
            # message: that rollback does not count towards disabling the queue (poison).
            queues = set() if stopping.requested() else self._received_queues
            count = (lambda conn: self._engine.count_rollbacks(conn, queues)) if queues else None
            disabled = self._storage.rollback(count) or []
        finally:
            self._release()
        self._engine.after_rollback(self._received_queues, released, disabled)

    def _release(self) -> None:
        self._storage.close()
        if self._left is not None:
            self._left.done()
            self._left = None

    @property
    def locked_groups(self) -> list[str]:
        """Conversation groups this transaction holds locked."""
        return sorted(self._storage.locks)


def _check_send(cat: Catalog, ep: Endpoint, message_type: str) -> None:
    """SEND's checks of one endpoint (the state from this transaction's view of it)."""
    if ep.state not in AFTER_SEND:
        raise ConversationStateError(
            f"the conversation endpoint {ep.handle} is in state {ep.state}, "
            "which does not allow SEND"
        )
    sent_by = cat.contract(ep.contract).get(message_type)
    if sent_by is None:
        raise ContractViolationError(
            f"message type {message_type!r} is not part of contract {ep.contract!r}", 8431)
    if ep.is_initiator and sent_by == "target":
        raise ContractViolationError(
            f"message type {message_type!r} is SENT BY TARGET in contract {ep.contract!r}, "
            "but this endpoint is the initiator", 8432)
    if not ep.is_initiator and sent_by == "initiator":
        raise ContractViolationError(
            f"message type {message_type!r} is SENT BY INITIATOR in contract "
            f"{ep.contract!r}, but this endpoint is the target", 8434)


__all__ = ["Rows", "Transaction", "dialogs"]

