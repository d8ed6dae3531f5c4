"""RECEIVE and GET CONVERSATION GROUP: argument checks, the wait for work (woken by local
commits and the store's change feed), and what the transaction remembers of what it took.
Finding and locking a group is the store's (``TxStorage.take`` / ``lock_next``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from sbroker.core import messages as m
from sbroker.core import tracing
from sbroker.core.catalog import Catalog, Queue
from sbroker.core.errors import (
    ConversationNotFoundError,
    DatabaseError,
    InvalidArgumentError,
    QueueDisabledError,
)
from sbroker.engine import stopping
from sbroker.engine.abandon import Leftovers
from sbroker.engine.endpoints import Endpoint
from sbroker.engine.host import Host
from sbroker.storage.ports import TxStorage

T = TypeVar("T")


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


def check_timeout(timeout: object) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise InvalidArgumentError(
            f"timeout must be seconds >= 0, or None to wait forever; got {timeout!r}"
        )
    return float(timeout)


class Receiving:
    """The receiving statements of :class:`~sbroker.engine.transaction.Transaction`."""

    _engine: Host
    _storage: TxStorage
    _received: dict[int, tuple[int, bool, str]]
    _received_queues: set[int]
    _left: Leftovers | None

    # the transaction's own, used here: methods (not attributes of a Callable type), so that
    # a compiled Receiving finds the subclass's
    def _check_active(self) -> None:
        raise NotImplementedError

    def _watch(self) -> None:
        raise NotImplementedError

    def _cat(self, refresh: bool = False, *, again: bool = False) -> Catalog:
        raise NotImplementedError

    def _lookup(self, fn: Callable[[Catalog], T]) -> T:
        raise NotImplementedError

    def _endpoint(self, handle: object, *, fresh: bool = False) -> Endpoint:
        raise NotImplementedError

    def receive(self, queue: str, *, top: int | None = None,
                conversation_handle: object = None, conversation_group_id: object = None,
                timeout: float | None = 0) -> list[m.Message]:
        """RECEIVE: messages of one conversation group, the highest-priority unlocked one."""
        self._check_active()
        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 0):
            raise InvalidArgumentError(f"top must be an int >= 0 or None, got {top!r}")
        if top == 0:
            return []
        tracer = tracing.TRACER
        start = 0 if tracer is None else tracing.before_receive()
        msgs = self._wait_for(queue, timeout, conversation_handle, conversation_group_id,
                              lambda q, group, handle, probing:
                              self._take(q, group, handle, top, probing))
        if msgs and tracer is not None:
            tracing.receive(tracer, queue, msgs, start)
        return msgs

    def ready_groups(self, queue: str) -> list[tuple[str, int, int, str]]:
        """The queue's conversation groups with ready messages that no transaction holds:
        (group id, priority, queuing order, conversation id) of each one's next message, for
        a reader that chooses among them itself (then ``receive(conversation_group_id=)``)."""
        self._check_active()
        q: Queue = self._lookup(lambda c: c.queue(queue))
        conn = self._storage.reader()
        return [(str(g), int(p), int(o), str(c))
                for g, p, o, c in conn.query_all(conn.sql.ready_groups, (q.queue_id,))]

    def get_conversation_group(self, queue: str, timeout: float | None = 0) -> str | None:
        """Lock and return the next conversation group with ready messages, or None."""
        self._check_active()

        def attempt(q: Queue, group: str | None, handle: str | None,
                    probing: bool) -> list[str]:
            self._watch()
            found = self._storage.lock_next(q.queue_id, tuple(self._received), probing)
            return [] if found is None else [found]

        result = self._wait_for(queue, timeout, None, None, attempt)
        return result[0] if result else None

    def _wait_for(self, queue: str, timeout: object, handle: object, group: object,
                  attempt: Callable[[Queue, str | None, str | None, bool], list[Any]]
                  ) -> list[Any]:
        seconds = check_timeout(timeout)
        if handle is not None and group is not None:
            raise InvalidArgumentError(
                "give conversation_handle or conversation_group_id, not both"
            )
        q: Queue = self._lookup(lambda c: c.queue(queue))
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
        engine = self._engine
        clock = engine.clock
        listeners = engine.listeners
        deadline = None if seconds is None else clock.now() + seconds
        unfiltered = fixed_group is None
        waiting = False
        first = True
        try:
            while True:
                seen = engine.notifier.token(q.queue_id)
                if not first:  # it waited: the queue may have been altered meanwhile
                    q = self._cat(again=True).queue(queue)
                if not q.status:
                    raise QueueDisabledError(f"the queue {queue!r} is disabled (status off)")
                result = attempt(q, fixed_group, fixed_handle, not first)
                first = False
                if result:
                    listeners.received(q.queue_id, empty=False)
                    return list(result)
                out_of_time = seconds == 0 or (deadline is not None and clock.now() >= deadline)
                if out_of_time or stopping.requested():  # or this activated procedure must stop
                    if unfiltered:
                        listeners.received(q.queue_id, empty=True)
                    return []
                if unfiltered and not waiting:
                    waiting = True
                    listeners.waiting(q.queue_id, +1)
                engine.notifier.wait(seen, deadline, queue_id=q.queue_id)
                if engine.closed:
                    raise DatabaseError("the broker was closed while RECEIVE was waiting")
        finally:
            if waiting:
                listeners.waiting(q.queue_id, -1)

    def _take(self, q: Queue, group: str | None, handle: str | None, top: int | None,
              probing: bool) -> list[m.Message]:
        received = self._received
        limit = -1 if top is None else top + len(received)
        self._watch()
        rows = self._storage.take(q.queue_id, group, handle, limit, tuple(received), probing)
        out: list[m.Message] = []
        retention = q.retention
        for row in rows:
            if row[2] in received:
                continue
            received[row[2]] = (q.queue_id, retention, row[11])
            out.append(m.message_from_row(row))
            if top is not None and len(out) >= top:
                break
        if out:
            self._received_queues.add(q.queue_id)
        return out
