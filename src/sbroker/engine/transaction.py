"""A broker transaction: the statements of SPEC §3.

Statements check their arguments at once and record what they will do; COMMIT applies it all in
one short SQLite write transaction.  RECEIVE takes a conversation group lock (a row owned by this
transaction and its process session) in its own millisecond write, so a transaction that holds a
group for minutes never holds the SQLite write lock meanwhile.  ``execute`` is the exception: an
application write statement opens the SQLite write transaction and holds it until the end, so
that it commits or rolls back together with the broker effects.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from sbroker.core import messages as m
from sbroker.core.conversation import (
    AFTER_SEND,
    Event,
    State,
    transition,
)
from sbroker.core.errors import (
    BrokerError,
    CommitConflictError,
    ContractViolationError,
    ConversationNotFoundError,
    ConversationStateError,
    DatabaseError,
    InvalidArgumentError,
    NotFoundError,
    QueueDisabledError,
    TransactionStateError,
)
from sbroker.core.priority import match_priority
from sbroker.engine import abandon, catalog, dialogs, stopping, streams
from sbroker.storage.sqlite.sweeper import live

if TYPE_CHECKING:
    from sbroker.broker import Broker
    from sbroker.engine.catalog import Catalog, Queue

CATALOG_MAX_AGE = 0.05  # see Broker._catalog_for
MAX_LIFETIME = 2**31 - 1
T = TypeVar("T")
_owners = itertools.count(1)

# The first ready row in RECEIVE order that is neither in a group another transaction holds
# nor already received by this one; filtered in SQL, so rows of held groups (a backlog, or
# this transaction's own earlier groups) cost no Python loop while the writer is held.
_CANDIDATE = (
    "SELECT m.group_id FROM sb_messages m WHERE m.queue_id = ? AND m.status = 1"
    f" AND {live('m')} AND m.group_id NOT IN"
    " (SELECT group_id FROM sb_group_locks WHERE queue_id = ? AND owner != ?)"
    " AND m.queuing_order NOT IN (SELECT value FROM json_each(?))"
    " AND m.group_id NOT IN (SELECT value FROM json_each(?))"
    " ORDER BY m.priority DESC, m.queuing_order LIMIT 1"
)
_FETCH = (
    "SELECT status, priority, queuing_order, group_id, handle, msn, service, contract,"
    " message_type, validation, body, message_id, enqueued_at FROM sb_messages"
    " WHERE group_id = ? AND status = 1{extra}"
    f" AND {live('sb_messages')}"
    " ORDER BY priority DESC, conv_order, is_timer DESC, msn LIMIT ?"
)
# The common RECEIVE in one statement: nothing received yet in this transaction and no group
# held in the writer's memory by another one, so the only exclusions are lock rows.
_TAKE_NEXT = _FETCH.format(extra="").replace("group_id = ?", (
    "group_id = (SELECT m.group_id FROM sb_messages m WHERE m.queue_id = ? AND m.status = 1"
    f" AND {live('m')} AND NOT EXISTS (SELECT 1 FROM sb_group_locks l WHERE l.group_id = m.group_id"
    " AND l.owner != ?) ORDER BY m.priority DESC, m.queuing_order LIMIT 1)"))


def _senders(ops: list[tuple[Any, ...]], eps: dict[str, dialogs.Endpoint]) -> dict[str, int]:
    """The conversations a transaction that only SENDs sends on, each once, with their rowid
    as the transaction saw it (else {})."""
    seen: dict[str, int] = {}
    for op in ops:
        if op[0] != "send":
            return {}
        for handle in op[1]:
            if handle not in seen:
                seen[handle] = eps[handle].conv_order or 0
    return seen


def normalize_handle(handle: object) -> str:
    if isinstance(handle, uuid.UUID):
        return str(handle).upper()
    if not isinstance(handle, str) or not handle:
        raise InvalidArgumentError(
            f"a conversation handle is a UUID string, got {type(handle).__name__} {handle!r}"
        )
    try:
        return str(uuid.UUID(handle)).upper()
    except ValueError:
        raise ConversationNotFoundError(
            f"the conversation handle {handle!r} is not a valid UUID"
        ) from None


def _check_timeout(timeout: object) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise InvalidArgumentError(
            f"timeout must be seconds >= 0, or None to wait forever; got {timeout!r}"
        )
    return float(timeout)


def _is_read_only(sql: str) -> bool:
    words = sql.lstrip().split(None, 1)
    return bool(words) and words[0].upper() in ("SELECT", "VALUES")


class Transaction:
    """``with broker.transaction() as tx:`` — commits on normal exit, rolls back on error."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._conn: sqlite3.Connection | None = None
        self._catalog: Catalog | None = None
        self._owner = f"{broker.session_id}:{next(_owners)}"
        self._ops: list[tuple[Any, ...]] = []
        self._eps: dict[str, dialogs.Endpoint] = {}
        self._gone: set[str] = set()
        self._locks: dict[str, int] = {}
        # queuing_order -> (queue, retention, message_id): rowids can be reused after deletes,
        # so the message id makes sure COMMIT deletes the very row that was received.
        self._received: dict[int, tuple[int, bool, str]] = {}
        self._received_queues: set[int] = set()
        self._held = False
        self._probing = False
        self._state = "active"
        self._left: abandon.Leftovers | None = None  # set once it holds locks or the writer

    def _watch(self) -> abandon.Leftovers:
        """Make sure a drop without COMMIT or ROLLBACK gives back what this one holds."""
        if self._left is None:
            self._left = abandon.watch(self, self._broker, self._owner, self._received_queues)
        return self._left

    # -- context manager ---------------------------------------------------------------------
    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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

    def _c(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._broker.db.acquire()
        return self._conn

    def _cat(self, refresh: bool = False) -> Catalog:
        if self._catalog is None or refresh:
            self._catalog = self._broker._catalog_for(
                self._c(), max_age=0.0 if refresh else CATALOG_MAX_AGE)
        return self._catalog

    def _lookup(self, fn: Callable[[Catalog], T]) -> T:
        """``fn(catalog)``, looking again at the database when a name is missing from a
        snapshot that may be a few ms old (another process may have just created it)."""
        try:
            return fn(self._cat())
        except NotFoundError:
            return fn(self._cat(refresh=True))

    def _write(self, fn: Callable[[sqlite3.Connection], T], *, lazy: bool = True) -> T:
        """Lock bookkeeping through the writer, never fsynced (locks die with the process
        anyway); ``lazy``: ``fn`` only takes locks, which may stay in the writer's memory
        until its next commit (see writer.py).  Inside the held transaction if there is one."""
        if self._held:
            return fn(self._c())
        return self._broker.db.writer.run(fn, durable=False, lazy=lazy)

    def _endpoint(self, handle: object, *, fresh: bool = False) -> dialogs.Endpoint:
        """The endpoint as this transaction sees it.  ``fresh=False`` may use the broker's
        snapshot (state and contract, for SEND's checks: COMMIT re-reads the row); statements
        that depend on the endpoint's current group pass ``fresh=True``."""
        eps, cache = self._eps, self._broker._endpoint_cache
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
                ep = eps[key] = dialogs.Endpoint(*cached)
                return ep
        loaded = dialogs.load_endpoint(self._c(), key)
        if loaded is None:
            raise ConversationNotFoundError(f"the conversation handle {key} is not found")
        self._broker._remember_endpoint(loaded)
        if ep is not None:
            loaded.state = ep.state  # keep this transaction's own state changes
        self._eps[key] = loaded
        return loaded

    # -- dialogs ------------------------------------------------------------------------------
    def begin_dialog(
        self,
        from_service: str,
        to_service: str,
        contract: str = m.DEFAULT,
        *,
        broker_instance: str | None = None,
        related_conversation: object = None,
        related_conversation_group: object = None,
        lifetime: float | None = None,
        encryption: bool = True,
    ) -> str:
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
            row = self._c().execute(
                "SELECT queue_id FROM sb_endpoints WHERE group_id = ? LIMIT 1", (group,)
            ).fetchone()
            if row is not None and row[0] != service.queue_id:
                raise InvalidArgumentError(
                    f"conversation group {group} belongs to another queue than the service "
                    f"{from_service!r} uses"
                )
        now = self._broker.clock.now()
        ep = dialogs.Endpoint(
            conv_order=None, handle=m.new_id(), conversation_id=m.new_id(), is_initiator=True,
            group_id=group, queue_id=service.queue_id, service=from_service,
            far_service=to_service, far_broker_instance=broker_instance, contract=contract,
            state=State.SO.value,
            priority=match_priority(cat.priorities, contract, from_service, to_service),
            send_seq=0, receive_seq=0, lifetime_expires=now + lifetime, timer_at=None,
            created_at=now, encryption=bool(encryption),
        )
        self._eps[ep.handle] = ep
        self._ops.append(("begin", replace(ep)))
        return ep.handle

    def send(
        self,
        handle_or_handles: object,
        message_type: str = m.DEFAULT,
        body: bytes | str = b"",
    ) -> None:
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
            self._check_send(cat, ep, message_type)
            ep.state = AFTER_SEND[ep.state]
            self._ops.append(("send", (ep.handle,), message_type, data))
            return
        eps = [self._endpoint(h) for h in handles]
        for ep in eps:
            self._check_send(cat, ep, message_type)
        for ep in eps:
            ep.state = AFTER_SEND[ep.state]
        self._ops.append(("send", tuple(ep.handle for ep in eps), message_type, data))

    @staticmethod
    def _check_send(cat: Catalog, ep: dialogs.Endpoint, message_type: str) -> None:
        """SEND's checks of one endpoint (the state from this transaction's view of it)."""
        if ep.state not in AFTER_SEND:
            raise ConversationStateError(
                f"the conversation endpoint {ep.handle} is in state {ep.state}, "
                "which does not allow SEND"
            )
        sent_by = cat.contract(ep.contract).get(message_type)
        if sent_by is None:
            raise ContractViolationError(
                f"message type {message_type!r} is not part of contract {ep.contract!r}",
                8431,
            )
        if ep.is_initiator and sent_by == "target":
            raise ContractViolationError(
                f"message type {message_type!r} is SENT BY TARGET in contract "
                f"{ep.contract!r}, but this endpoint is the initiator", 8432,
            )
        if not ep.is_initiator and sent_by == "initiator":
            raise ContractViolationError(
                f"message type {message_type!r} is SENT BY INITIATOR in contract "
                f"{ep.contract!r}, but this endpoint is the target", 8434,
            )

    def end_conversation(
        self,
        handle: object,
        *,
        error: int | None = None,
        description: str | None = None,
        cleanup: bool = False,
    ) -> None:
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
        self._ops.append(("end", ep.handle, error, description, bool(cleanup)))

    def begin_conversation_timer(self, handle: object, timeout: float) -> None:
        """Set (or reset) the endpoint's timer: a DialogTimer message arrives after ``timeout``."""
        self._check_active()
        seconds = _check_timeout(timeout)
        if seconds is None:
            raise InvalidArgumentError("a conversation timer needs a timeout in seconds")
        ep = self._endpoint(handle)
        if ep.state == State.CD.value:
            raise ConversationStateError(f"the conversation {ep.handle} is closed")
        self._ops.append(("timer", ep.handle, self._broker.clock.now() + seconds))

    def move_conversation(self, handle: object, conversation_group_id: object) -> None:
        """Move a conversation (and its queued messages) to another group of the same queue."""
        self._check_active()
        ep = self._endpoint(handle, fresh=True)
        group = normalize_handle(conversation_group_id)
        row = self._c().execute(
            "SELECT queue_id FROM sb_endpoints WHERE group_id = ? LIMIT 1", (group,)
        ).fetchone()
        if row is None:
            raise NotFoundError(f"conversation group {group} does not exist", 8418)
        if row[0] != ep.queue_id:
            raise InvalidArgumentError(
                f"conversation group {group} belongs to another queue: moves stay in one queue"
            )
        # Like MOVE CONVERSATION, lock both groups: moving messages another transaction has
        # received (or is receiving into) would hand them to a second reader.
        q = self._cat().queues_by_id[ep.queue_id]
        source = ep.group_id
        if not self._write(lambda conn: all(self._lock(conn, q, g) for g in (source, group))):
            raise CommitConflictError(
                f"cannot move conversation {ep.handle}: its group {source} or group {group} "
                "is locked by another transaction", 1205,
            )
        ep.group_id = group
        self._ops.append(("move", ep.handle, group))

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Cursor:
        """An application statement in the same database, atomic with this transaction."""
        self._check_active()
        if not isinstance(sql, str):
            raise InvalidArgumentError("execute needs an SQL string")
        if not self._held and not _is_read_only(sql):
            writer = self._broker.db.writer
            conn = writer.acquire_exclusive()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except BaseException:
                writer.release_exclusive()
                raise
            if self._conn is not None:
                self._broker.db.release(self._conn)
            self._conn = conn
            self._held = True
            self._watch().held = conn
        conn = self._c()
        try:
            return conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise BrokerError(f"application statement failed: {exc}") from exc

    # -- receiving ----------------------------------------------------------------------------
    def receive(
        self,
        queue: str,
        *,
        top: int | None = None,
        conversation_handle: object = None,
        conversation_group_id: object = None,
        timeout: float | None = 0,
    ) -> list[m.Message]:
        """RECEIVE: messages of one conversation group, the highest-priority unlocked one."""
        self._check_active()
        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 0):
            raise InvalidArgumentError(f"top must be an int >= 0 or None, got {top!r}")
        if top == 0:
            return []
        return self._wait_for(queue, timeout, conversation_handle, conversation_group_id,
                              lambda q, group, handle: self._take(q, group, handle, top))

    def get_conversation_group(self, queue: str, timeout: float | None = 0) -> str | None:
        """Lock and return the next conversation group with ready messages, or None."""
        self._check_active()
        found = self._wait_for(queue, timeout, None, None,
                               lambda q, group, handle: self._lock_next(q))
        return found[0] if found else None

    def _wait_for(self, queue: str, timeout: object, handle: object, group: object,
                  attempt: Any) -> list[Any]:
        seconds = _check_timeout(timeout)
        if handle is not None and group is not None:
            raise InvalidArgumentError(
                "give conversation_handle or conversation_group_id, not both"
            )
        q = self._lookup(lambda c: c.queue(queue))
        fixed_group: str | None = None
        fixed_handle: str | None = None
        if handle is not None:
            ep = self._endpoint(handle, fresh=True)
            if ep.queue_id != q.queue_id:
                raise ConversationNotFoundError(
                    f"the conversation {ep.handle} does not belong to queue {queue!r}"
                )
            fixed_group, fixed_handle = ep.group_id, ep.handle
        elif group is not None:
            fixed_group = normalize_handle(group)
        broker = self._broker
        clock = broker.clock
        deadline = None if seconds is None else clock.now() + seconds
        unfiltered = fixed_group is None
        waiting = False
        first = True
        fresh_call = True
        try:
            while True:
                seen = broker.notifier.token(q.queue_id)
                if not first:
                    q = self._cat(refresh=True).queue(queue)
                first = False
                if not q.status:
                    raise QueueDisabledError(f"the queue {queue!r} is disabled (status off)")
                self._probing = not fresh_call
                fresh_call = False
                result = attempt(q, fixed_group, fixed_handle)
                if result:
                    broker.hooks.received(q.queue_id, empty=False)
                    return list(result)
                out_of_time = seconds == 0 or (deadline is not None and clock.now() >= deadline)
                if out_of_time or stopping.requested():  # or this activated procedure must stop
                    if unfiltered:
                        broker.hooks.received(q.queue_id, empty=True)
                    return []
                if unfiltered and not waiting:
                    waiting = True
                    broker.hooks.waiting(q.queue_id, +1)
                broker.notifier.wait(seen, deadline, queue_id=q.queue_id)
                if broker._closed:
                    raise DatabaseError("the broker was closed while RECEIVE was waiting")
        finally:
            if waiting:
                broker.hooks.waiting(q.queue_id, -1)

    def _lazily_held_by_others(self) -> list[str]:
        """Groups other transactions of this process hold in the writer's memory (call as
        the writer's leader)."""
        return [g for g, e in self._broker.db.writer._lazy.items() if e[1] != self._owner]

    def _next_group(self, conn: sqlite3.Connection, q: Queue) -> str | None:
        others = self._lazily_held_by_others()
        row = conn.execute(
            _CANDIDATE, (q.queue_id, q.queue_id, self._owner,
                         json.dumps(list(self._received)) if self._received else "[]",
                         json.dumps(others) if others else "[]")
        ).fetchone()
        if row is not None:
            return str(row[0])
        self._reap_if_held(conn, q)
        return None

    def _reap_if_held(self, conn: sqlite3.Connection, q: Queue) -> None:
        """Nothing free to take: if other transactions hold groups of the queue, a dead
        process may be among them."""
        if conn.execute(
            "SELECT 1 FROM sb_group_locks WHERE queue_id = ? AND owner != ? LIMIT 1",
            (q.queue_id, self._owner),
        ).fetchone():
            self._broker.reap_dead_sessions(conn)

    def _lock(self, conn: sqlite3.Connection, q: Queue, group: str, *,
              known_free: bool = False) -> bool:
        """Take the group lock for this transaction; False if another transaction has it."""
        if group in self._locks:
            return True
        writer = self._broker.db.writer
        if not known_free:
            lazy_owner = writer.lazy_owner(group)
            if lazy_owner is not None and lazy_owner != self._owner:
                return False
            row = conn.execute(
                "SELECT owner FROM sb_group_locks WHERE group_id = ?", (group,)
            ).fetchone()
            if row is not None and row[0] != self._owner:
                return False
        if not self._locks:
            self._watch()
        values = (group, q.queue_id, self._owner, self._broker.session_id,
                  self._broker.clock.now())
        if self._held:
            conn.execute(
                "INSERT OR IGNORE INTO sb_group_locks(group_id, queue_id, owner, session_id,"
                " acquired_at) VALUES (?, ?, ?, ?, ?)", values,
            )
        else:
            writer.lazy_lock(*values)
        self._locks[group] = q.queue_id
        return True

    _PROBE_QUEUE = (
        "SELECT EXISTS(SELECT 1 FROM sb_messages m WHERE m.queue_id = ? AND m.status = 1"
        f" AND {live('m')} AND NOT EXISTS (SELECT 1 FROM sb_group_locks l"
        " WHERE l.group_id = m.group_id AND l.owner != ?)),"
        " EXISTS(SELECT 1 FROM sb_group_locks WHERE queue_id = ? AND owner != ?)"
    )
    _PROBE_GROUP = (
        "SELECT EXISTS(SELECT 1 FROM sb_messages WHERE group_id = ? AND status = 1{extra}"
        f" AND {live('sb_messages')}),"
        " EXISTS(SELECT 1 FROM sb_group_locks WHERE group_id = ? AND owner != ?)"
    )

    def _worth_a_write(self, q: Queue, group: str | None, handle: str | None) -> bool:
        """A read-only look first: only go through the writer when there may be something
        to take, so waiters woken by a commit elsewhere cost no write transaction.  The first
        attempt of a RECEIVE goes straight to the writer (usually there is something)."""
        if self._held or not self._probing:
            return True
        conn = self._c()
        if group is None:
            free, locked = conn.execute(
                self._PROBE_QUEUE, (q.queue_id, self._owner, q.queue_id, self._owner)
            ).fetchone()
            if not free and locked:
                self._broker.reap_dead_sessions(conn)  # a dead process may hold them
            return bool(free)
        extra = " AND handle = ?" if handle else ""
        args = (group, handle) if handle else (group,)
        ready, locked = conn.execute(
            self._PROBE_GROUP.format(extra=extra), (*args, group, self._owner)
        ).fetchone()
        if ready and locked:
            self._broker.reap_dead_sessions(conn)
            return True
        return bool(ready)

    def _lock_next(self, q: Queue) -> list[str]:
        def attempt(conn: sqlite3.Connection) -> list[str]:
            streams.refuse_if_streamed(conn, self._broker, q.queue_id, q.name)
            group = self._next_group(conn, q)
            if group is None or not self._lock(conn, q, group, known_free=True):
                return []
            return [group]

        if not self._worth_a_write(q, None, None):
            return []
        return self._write(attempt)

    def _take(self, q: Queue, group: str | None, handle: str | None,
              top: int | None) -> list[m.Message]:
        limit = -1 if top is None else top + len(self._received)
        extra = " AND handle = ?" if handle else ""
        sql = _FETCH.format(extra=extra)

        def attempt(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            streams.refuse_if_streamed(conn, self._broker, q.queue_id, q.name)
            target, free = group, False
            if target is None and not self._received and not self._lazily_held_by_others():
                found = conn.execute(_TAKE_NEXT, (q.queue_id, self._owner, limit)).fetchall()
                if not found:
                    self._reap_if_held(conn, q)
                elif not self._lock(conn, q, found[0][3], known_free=True):
                    return []
                return found
            if target is None:
                target = self._next_group(conn, q)
                if target is None:
                    return []
                free = True
            if not self._lock(conn, q, target, known_free=free):
                return []
            args: tuple[Any, ...] = (target, handle, limit) if handle else (target, limit)
            return conn.execute(sql, args).fetchall()

        if not self._worth_a_write(q, group, handle):
            return []
        rows = self._write(attempt)
        out: list[m.Message] = []
        retention = q.retention
        for row in rows:
            if row[2] in self._received:
                continue
            self._received[row[2]] = (q.queue_id, retention, row[11])
            out.append(m.Message(*row))
            if top is not None and len(out) >= top:
                break
        if out:
            self._received_queues.add(q.queue_id)
        return out

    # -- ending ---------------------------------------------------------------------------------
    def commit(self) -> None:
        """Make every effect of the transaction durable at once."""
        self._check_active()
        self._state = "committed"
        if not (self._ops or self._received or self._locks or self._held):
            self._release()
            return
        cat = self._cat()
        ctx = dialogs.Context(None, cat, self._broker.clock.now(), self._broker.anti_replay)  # type: ignore[arg-type]

        sent = _senders(self._ops, self._eps)

        def apply(conn: sqlite3.Connection) -> None:
            ctx.conn = conn
            ctx.ready_queues.clear()
            if self._ops and catalog.current_version(conn) != ctx.catalog.version:
                # DDL since the statements ran: check the sends against what is true now
                # (a commit that only receives uses no catalog).
                ctx.catalog = self._broker._catalog_for(conn)
                self._recheck_sends(ctx.catalog)
            # Received rows first: a conversation this transaction also ends then counts
            # them as received, not removed unreceived.
            self._finish_receives(conn)
            if sent:
                dialogs.prefetch_senders(ctx, sent)
            send = dialogs.send_user_message
            for op in self._ops:
                if op[0] == "send":
                    _, handles, mtype, body = op
                    for handle in handles:
                        send(ctx, handle, mtype, body)
                else:
                    dialogs.flush(ctx)
                    self._apply(ctx, op)
            dialogs.flush(ctx)

        try:
            if self._held:
                conn = self._c()
                try:
                    apply(conn)
                    conn.execute("COMMIT")
                    self._broker.db.writer.committed_exclusive()
                finally:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    self._broker.db.writer.released()  # we hold the writer: safe here
                    self._drop_hold()
            else:
                self._broker.db.writer.run(apply, durable=True)
        except BaseException as exc:
            self._state = "active"
            self.rollback()
            if isinstance(exc, sqlite3.Error):
                raise BrokerError(f"commit failed: {exc}") from exc
            raise
        released = set(self._locks.values())
        timers = any(op[0] in ("timer", "begin") for op in self._ops)
        self._broker._forget_endpoints(ctx.changed)
        self._broker._forget_endpoints(op[1] for op in self._ops if op[0] in ("end", "move"))
        self._release()
        self._broker._after_commit(ctx.ready_queues, released, self._received_queues,
                                   timers or ctx.tq_changed)

    def _recheck_sends(self, cat: Catalog) -> None:
        for op in self._ops:
            if op[0] == "send":
                for handle in op[1]:
                    contract = self._eps[handle].contract
                    if op[2] not in cat.contracts.get(contract, {}):
                        raise ContractViolationError(
                            f"message type {op[2]!r} is no longer part of contract "
                            f"{contract!r}", 8431,
                        )

    def _finish_receives(self, conn: sqlite3.Connection) -> None:
        if self._received:
            taken: dict[int, list[tuple[int, str]]] = {}
            kept: list[tuple[int, str]] = []
            for qo, (queue_id, keep, mid) in self._received.items():
                if keep:
                    kept.append((qo, mid))
                else:
                    taken.setdefault(queue_id, []).append((qo, mid))
            for queue_id, rows in taken.items():
                self._broker.db.sweeper.consume(conn, rows, queue_id)
            if kept:
                conn.executemany(
                    "UPDATE sb_messages SET status = 0 WHERE queuing_order = ? AND message_id = ?",
                    kept,
                )
        if self._locks:
            still_lazy = self._broker.db.writer.lazy_release(self._owner)
            if still_lazy < len(self._locks):  # some were written as rows meanwhile
                conn.execute("DELETE FROM sb_group_locks WHERE owner = ?", (self._owner,))
        if self._received_queues:
            ids = sorted(self._received_queues)
            conn.execute(
                "UPDATE sb_queues SET rollback_count = 0 WHERE rollback_count != 0 AND queue_id"
                f" IN ({','.join('?' * len(ids))})",
                ids,
            )

    def _apply(self, ctx: dialogs.Context, op: tuple[Any, ...]) -> None:
        kind = op[0]
        if kind == "begin":
            dialogs.insert_endpoint(ctx, replace(op[1]))
            return
        if kind == "end":
            _, handle, error, description, cleanup = op
            dialogs.end(ctx, self._current(ctx, handle), error, description, cleanup)
            return
        if kind == "timer":
            _, handle, at = op
            self._current(ctx, handle)
            ctx.conn.execute("UPDATE sb_endpoints SET timer_at = ? WHERE handle = ?", (at, handle))
            return
        if kind == "move":
            _, handle, group = op
            ep = self._current(ctx, handle)
            ctx.conn.execute("UPDATE sb_endpoints SET group_id = ? WHERE handle = ?",
                             (group, handle))
            ctx.conn.execute(
                "UPDATE sb_messages SET group_id = ? WHERE group_id = ? AND handle = ?",
                (group, ep.group_id, handle),
            )
            return
        raise AssertionError(kind)

    @staticmethod
    def _current(ctx: dialogs.Context, handle: str) -> dialogs.Endpoint:
        ep = dialogs.load_endpoint(ctx.conn, handle)
        if ep is None:
            raise CommitConflictError(
                f"the conversation {handle} was ended and removed before COMMIT", 8426
            )
        return ep

    def rollback(self) -> None:
        """Undo every effect; received messages become receivable again."""
        if self._state in ("rolled back",):
            return
        if self._state == "committed":
            raise TransactionStateError("the transaction has already committed")
        self._state = "rolled back"
        conn = self._conn
        try:
            if conn is not None and conn.in_transaction:
                conn.execute("ROLLBACK")
            self._drop_hold()
            disabled: list[int] = []
            if self._locks or self._received_queues:
                def undo(c: sqlite3.Connection) -> list[int]:
                    self._broker.db.writer.lazy_release(self._owner)
                    c.execute("DELETE FROM sb_group_locks WHERE owner = ?", (self._owner,))
                    return self._broker._count_rollbacks(c, self._received_queues)

                disabled = self._write(undo, lazy=False)
        finally:
            released = set(self._locks.values())
            self._release()
        self._broker._after_rollback(self._received_queues, released, disabled)

    def _drop_hold(self) -> None:
        """Give the writer's connection back (after COMMIT or ROLLBACK of a held transaction)."""
        if self._held:
            conn, self._conn, self._held = self._conn, None, False
            if self._left is not None:
                self._left.held = None
            try:
                if conn is not None and conn.in_transaction:
                    conn.execute("ROLLBACK")
            finally:
                self._broker.db.writer.release_exclusive()

    def _release(self) -> None:
        self._drop_hold()
        if self._conn is not None:
            self._broker.db.release(self._conn)
            self._conn = None
        self._held = False
        self._locks = {}
        if self._left is not None:
            self._left.done()
            self._left = None

    @property
    def locked_groups(self) -> list[str]:
        """Conversation groups this transaction holds locked."""
        return sorted(self._locks)

