"""What a Spark stream needs of the engine (docs/stream.md): a queue read by position, claimed
by one reader, received in ranges; and sends in batches that a replay cannot send twice.

Positions. On SQLite a message's ``queuing_order`` is its position in the database; since
migration 8 it is AUTOINCREMENT, so a position is never handed out twice and a new message
always lands after every position a stream has seen (a plain rowid would reuse the top one
once it was received). On PostgreSQL ``queuing_order`` is taken at INSERT and rows become
visible in commit order, so a stream could plan past a row that commits later: the reader
numbers rows itself (``stream_number``, before each plan) as they become visible, and the
statements below read that ``stream_pos`` where SQLite reads ``queuing_order``. A stream's
offset is ``{"queue": name, "queuing_order": N}`` (N a stream position); the range of a
micro-batch is (start, end]: the ready messages of the queue with a position in it. Nothing
but the stream receives from the queue, and new messages land after ``end``, so reading the
range twice gives the same rows (a conversation ended meanwhile by END CONVERSATION is the
exception: its messages are gone). Within a priority level the index ``sb_messages_ready``
gives rows in position order from any position on, so each statement reads one level and
Python merges the ten (a scan from a position over all levels would read every message of
the queue, and a rowid scan every message of every queue).

Two positions per queue live in ``sb_stream_sources``: ``committed`` (every message at or
before it has been received) and ``planned`` (the highest end offset handed to Spark). Spark's
source plans from the start Spark gives it; without one a reader plans from ``planned``, so its
offsets never go back behind one Spark may hold. A Trigger.AvailableNow run plans up to its
:meth:`StreamSource.horizon`.

The claim. One row per queue names the reader that holds it (a token of its own) and the
broker session of its process; the session's end (``Broker.close``) or its reaping as dead
(pid gone) clears it through a foreign key. RECEIVE and GET CONVERSATION GROUP on a claimed
queue raise :class:`QueueStreamedError` (the storage checks inside the write transaction that
takes the group lock, so no RECEIVE slips in); a second claim waits a few seconds for a
holder whose process is on its way out (Spark stops a reader by killing its process), then is
refused with the same error.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sbroker.core import messages as m
from sbroker.core.catalog import Catalog
from sbroker.core.clock import Clock
from sbroker.core.conversation import SENDABLE
from sbroker.core.errors import (
    BrokerError,
    CommitConflictError,
    ContractViolationError,
    InvalidArgumentError,
    NotFoundError,
    QueueDisabledError,
    QueueStreamedError,
)
from sbroker.engine.transaction import Transaction
from sbroker.storage import queries
from sbroker.storage.ports import Store

PRIORITIES = range(10, 0, -1)
LAST_POSITION = 2**63 - 1
CLAIM_WAIT = 5.0
"""Seconds a claim waits for another reader's claim to go (its process dying) before it is
refused: Spark stops a stream's reader by killing its process, and the next run of the query
may come at once."""
CLAIM_POLL = 0.1
NUMBER_CHUNK = 10_000
"""Rows a PostgreSQL stream numbers per statement when it numbers a whole backlog."""
SINK_ATTEMPTS = 3


_opener: Callable[[str], Any] | None = None


class StreamBroker(Protocol):
    """What this module uses of a broker (``Broker`` satisfies it): its store, session,
    catalog, clock and transactions."""

    @property
    def db(self) -> Store: ...

    @property
    def session_id(self) -> int: ...

    @property
    def catalog(self) -> Catalog: ...

    @property
    def clock(self) -> Clock: ...

    def transaction(self) -> Transaction: ...


def set_opener(opener: Callable[[str], Any]) -> None:
    """How :func:`open_broker` opens a database: the composition root (``Broker.open``)
    registers itself here, since the layers that need it may not import it."""
    global _opener
    _opener = opener


def open_broker(url: str) -> Any:
    """A Broker on ``url`` (a path, ``sqlite:///path``, ``postgresql://...``), for code that
    runs in a process of its own (Spark's Python workers) and only has the URL."""
    if _opener is None:
        raise BrokerError("sbroker.broker is not imported: import sbroker first")
    return _opener(url)


def sql(broker: StreamBroker) -> queries.Queries:
    """The statements of this module, in the broker's backend's dialect."""
    return broker.db.sql


def _reap(broker: StreamBroker) -> None:
    """Drop the rows of dead processes now (a claim may be among them)."""
    broker.db.reap(broker.session_id, force=True)


@dataclass(frozen=True)
class QueueInfo:
    queue_id: int
    name: str
    status: bool
    retention: bool
    activation: bool


def queue_info(broker: StreamBroker, name: str) -> QueueInfo:
    """The queue ``name`` (NotFoundError if there is none)."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"a queue name is a non-empty string, got {name!r}")
    with broker.db.read() as conn:
        row = conn.execute(sql(broker)["queue_by_name"], (name,)).fetchone()
    if row is None:
        raise NotFoundError(f"queue {name!r} does not exist: create it with create_queue")
    return QueueInfo(int(row[0]), name, bool(row[1]), bool(row[2]), bool(row[3]))


def _merged(lists: Sequence[Sequence[Any]], key: Any = None) -> list[Any]:
    """The rows of the priority levels in one position order."""
    non_empty = [rows for rows in lists if rows]
    if len(non_empty) <= 1:
        return list(non_empty[0]) if non_empty else []
    return list(heapq.merge(*non_empty, key=key))


@dataclass
class _Read:
    """One consistent read of the database (a read transaction)."""

    conn: Any

    def levels(self, statement: str, params: dict[str, Any]) -> list[list[Any]]:
        return [self.conn.execute(statement, {**params, "priority": p}).fetchall()
                for p in PRIORITIES]


@contextlib.contextmanager
def _reading(broker: StreamBroker) -> Iterator[_Read]:
    with broker.db.read() as conn:
        conn.begin()
        try:
            yield _Read(conn)
        finally:
            conn.commit()


def positions(broker: StreamBroker, queue_id: int, after: int, through: int = LAST_POSITION,
              limit: int = -1, *, snapshot: bool = False) -> list[int]:
    """Positions of the queue's ready messages in (after, through], in order, at most
    ``limit`` (-1: all).  ``snapshot``: every ready message (a batch read), by queuing order,
    where a stream's positions cover only the messages it has numbered (PostgreSQL)."""
    params = {"queue": queue_id, "after": after, "through": through, "limit": limit}
    statement = "snapshot_positions" if snapshot else "level_positions"
    with _reading(broker) as read:
        found = _merged(read.levels(sql(broker)[statement], params))
    out = [int(row[0]) for row in found]
    return out if limit < 0 else out[:limit]


def read_range(broker: StreamBroker, queue_id: int, after: int, through: int, *,
               snapshot: bool = False) -> list[tuple[Any, ...]]:
    """The queue's ready messages in (after, through], in position order: (handle, group,
    message_sequence_number, message_type, service, body, enqueued_at, priority, position);
    ``snapshot`` as in :func:`positions`."""
    params = {"queue": queue_id, "after": after, "through": through}
    statement = "snapshot_rows" if snapshot else "level_rows"
    with _reading(broker) as read:
        found = _merged(read.levels(sql(broker)[statement], params), key=_position)
    return found


def _position(row: tuple[Any, ...]) -> Any:
    return row[-1]


def split(found: Sequence[int], after: int, through: int,
          per_part: int) -> list[tuple[int, int]]:
    """(after, through] cut into ranges of at most ``per_part`` of the ``found`` positions."""
    if per_part < 1:
        raise InvalidArgumentError("a part holds at least one message")
    bounds = [after, *found[per_part - 1:-1:per_part], through]
    return list(itertools.pairwise(bounds))


class StreamSource:
    """A queue held by one stream reader, on Spark's driver: claim it, plan batches by
    position, receive what Spark has committed, release it."""

    def __init__(self, broker: StreamBroker, queue: str) -> None:
        self.broker = broker
        self.queue = queue_info(broker, queue)
        self.committed = 0
        self.planned = 0
        self.claimed = False
        self.token = m.new_id()  # this reader's, even beside another in the same session
        self._last_plan: tuple[int, int, list[int]] = (0, 0, [])  # after, end, positions

    # -- the claim -------------------------------------------------------------------------
    def claim(self, *, wait: float = CLAIM_WAIT) -> None:
        """Take the queue for this reader; QueueStreamedError if another reader keeps it for
        ``wait`` seconds."""
        clock = self.broker.db.clock  # the store's: another process's claim is real time
        deadline = clock.monotonic() + wait
        while True:
            _reap(self.broker)
            problem = self._try_claim()
            if problem is None:
                self.claimed = True
                return
            if clock.monotonic() >= deadline:
                raise QueueStreamedError(problem)
            clock.sleep(CLAIM_POLL)  # another process must go first: nothing to wait on here

    def _try_claim(self) -> str | None:
        """None once claimed, else why not."""
        q, b = self.queue, self.broker
        statements = sql(b)
        with b.transaction() as tx:
            row = tx.execute(statements["queue_by_name"], (q.name,)).fetchone()
            if row is None or int(row[0]) != q.queue_id:
                raise NotFoundError(f"queue {q.name!r} does not exist any more")
            if row[3]:
                raise InvalidArgumentError(
                    f"queue {q.name!r} has activation on: a streamed queue is read by the stream "
                    "alone; alter_queue it with activation=None first")
            mine = {"queue": q.queue_id, "session": b.session_id, "token": self.token,
                    "now": b.clock.now()}
            if tx.execute(statements["stream_claim"], mine).rowcount:
                locked = tx.execute(statements["queue_locked_groups"], (q.queue_id,)).fetchone()
                if not locked[0]:
                    found = tx.execute(statements["stream_positions"], (q.queue_id,)).fetchone()
                    self.committed, self.planned = int(found[0]), int(found[1])
                    why = None
                else:
                    why = self._locked(locked[0])
            else:
                holder = tx.execute(statements["stream_holder"], (q.queue_id,)).fetchone()
                who = f"pid {holder[1]} on {holder[2]}" if holder else "another process"
                why = (f"queue {q.name!r} is read by another stream ({who}): a queue has one "
                       "stream reader; stop that query first")
            if why is not None:
                tx.rollback()
                return why
        # Look again once the claim is committed. On SQLite the look above, under the
        # writer, was enough; on PostgreSQL a RECEIVE takes its group's lock and then looks
        # for a claim (sb_take), so a RECEIVE that missed the claim holds its lock now.
        with b.transaction() as tx:
            locked = tx.execute(statements["queue_locked_groups"], (q.queue_id,)).fetchone()
        if locked[0]:
            self.claimed = True
            self.release()
            return self._locked(locked[0])
        return None

    def _locked(self, groups: int) -> str:
        return (f"queue {self.queue.name!r} has {groups} conversation group(s) locked by "
                "transactions receiving from it: a stream needs the queue to itself")

    def release(self) -> None:
        """Give the queue back (its positions stay for the next reader)."""
        if self.claimed:
            self.claimed = False
            with self.broker.transaction() as tx:
                tx.execute(sql(self.broker)["stream_release"], self._mine())

    def _mine(self) -> dict[str, Any]:
        return {"queue": self.queue.queue_id, "token": self.token}

    def _owned(self, tx: Any) -> None:
        found = tx.execute(sql(self.broker)["stream_owned"], self._mine()).fetchone()
        if found is None:
            self.claimed = False
            raise QueueStreamedError(
                f"the stream lost its claim on queue {self.queue.name!r} (its broker session "
                "ended): restart the query")

    # -- planning and receiving --------------------------------------------------------------
    def _check(self) -> None:
        if not self.claimed:
            raise QueueStreamedError(f"the stream does not hold queue {self.queue.name!r}")
        if not queue_info(self.broker, self.queue.name).status:
            raise QueueDisabledError(
                f"the queue {self.queue.name!r} is disabled (status off): enable it with "
                "alter_queue(status=True) and restart the query")

    def _number(self, limit: int | None) -> None:
        """Give positions to committed ready rows that have none (PostgreSQL): at most
        ``limit``, or every one (None) a chunk at a time; and check the claim."""
        chunk = NUMBER_CHUNK if limit is None else limit
        while True:
            with self.broker.transaction() as tx:
                numbered = tx.execute(sql(self.broker)["stream_number"],
                                      {**self._mine(), "limit": chunk}).fetchone()
                if numbered is None or numbered[0] is None:
                    self._owned(tx)
                    return
            if limit is not None or int(numbered[0]) < chunk:
                return

    def horizon(self) -> int:
        """A position at or after every message committed to the queue so far and before
        every one committed later (the end of a Trigger.AvailableNow run)."""
        self._check()
        self._number(None)
        with self.broker.db.read() as conn:
            found = conn.execute(sql(self.broker)["stream_horizon"],
                                 {"queue": self.queue.queue_id}).fetchone()
        return max(self.planned, int(found[0]) if found else 0)

    def latest(self, max_messages: int | None, *, after: int | None = None,
               through: int = LAST_POSITION) -> int:
        """The end of the next batch: the position of the ``max_messages``-th ready message
        (None: of the last) in (``after``, ``through``], or ``after`` if there is none.
        ``after`` defaults to the highest end planned so far, which the end raises."""
        self._check()
        self._number(max_messages)  # PostgreSQL: positions for new rows
        start = self.planned if after is None else after
        found = positions(self.broker, self.queue.queue_id, start, through,
                          -1 if max_messages is None else max_messages)
        if not found or found[-1] <= start:
            return start
        end = found[-1]
        with self.broker.transaction() as tx:
            params = {**self._mine(), "planned": end}
            if not tx.execute(sql(self.broker)["stream_plan"], params).rowcount:
                self._owned(tx)
        self._last_plan = (start, end, found)
        self.planned = max(self.planned, end)
        return end

    def positions(self, after: int, through: int) -> list[int]:
        """The positions of the ready messages in (after, through]: those :meth:`latest` just
        found when it planned that range (Spark asks for the partitions of the batch it was
        handed), else read again."""
        last_after, last_end, found = self._last_plan
        if (after, through) == (last_after, last_end):
            return found
        return positions(self.broker, self.queue.queue_id, after, through)

    def commit(self, through: int) -> int:
        """Receive every ready message up to position ``through`` (Spark has committed the
        batches that read them), in one broker transaction; how many were received."""
        if through <= self.committed:
            return 0
        statements = sql(self.broker)
        params = {**self._mine(), "after": self.committed, "through": through}
        with self.broker.transaction() as tx:
            if not tx.execute(statements["stream_commit"], params).rowcount:  # takes the writer
                self._owned(tx)
                return 0
            ended = [row[0] for row in tx.execute(statements["range_ended_conversations"], {
                **params, "end_dialog": m.END_DIALOG, "error": m.ERROR}).fetchall()]
            if self.queue.retention:
                received = tx.execute(statements["range_retain"], params).rowcount
            else:
                tx.execute(statements["range_count_received"], params)
                received = tx.execute(statements["range_delete"], params).rowcount
            for handle in ended:  # the only statement left to a side that got EndDialog/Error
                tx.end_conversation(handle)
        self.committed = through
        self.planned = max(self.planned, through)
        return int(received)


# -- the sink --------------------------------------------------------------------------------
@dataclass(frozen=True)
class SinkTarget:
    """Where a sink sends: every row becomes one message of ``message_type`` on a dialog
    from ``from_service`` to ``to_service`` under ``contract``."""

    from_service: str
    to_service: str
    contract: str = m.DEFAULT
    message_type: str = m.DEFAULT


def check_target(broker: StreamBroker, target: SinkTarget) -> None:
    """A clear error unless a sink can send to ``target``."""
    cat = broker.catalog
    cat.service(target.from_service)
    contract = cat.contract(target.contract)
    if target.message_type not in cat.message_types:
        raise NotFoundError(f"message type {target.message_type!r} does not exist")
    sent_by = contract.get(target.message_type)
    if sent_by is None:
        raise ContractViolationError(
            f"message type {target.message_type!r} is not part of contract {target.contract!r}")
    if sent_by == "target":
        raise ContractViolationError(
            f"message type {target.message_type!r} is sent by the target in contract "
            f"{target.contract!r}: a sink begins the dialogs, so it sends as the initiator")
    far = cat.services.get(target.to_service)
    if far is not None:
        if target.contract not in far.contracts:
            raise ContractViolationError(
                f"service {target.to_service!r} does not accept contract {target.contract!r}")
    elif not any(r.service_name in (None, target.to_service) and r.address != "LOCAL"
                 for r in cat.routes):
        raise NotFoundError(
            f"service {target.to_service!r} does not exist here and no route leads to it")


class _Raced(Exception):
    """Another writer mapped a key meanwhile: send the batch again."""


def send_rows(broker: StreamBroker, target: SinkTarget, keys: Sequence[str],
              bodies: Sequence[bytes | str], *, query_id: str | None = None,
              batch_id: int | None = None) -> int:
    """Send one message per body in ONE broker transaction, the bodies of one key on one
    conversation in order (kept across calls); how many were sent. With ``query_id`` and
    ``batch_id``: a batch at or before the last one recorded for the query sends nothing."""
    if len(keys) != len(bodies):
        raise InvalidArgumentError("send_rows needs one key per body")
    if not bodies:
        return 0  # nothing to send, nothing to record: a replay sends nothing either
    if (query_id is None) != (batch_id is None):
        raise InvalidArgumentError("give query_id and batch_id together")
    for attempt in range(SINK_ATTEMPTS):
        try:
            return _send_once(broker, target, keys, bodies, query_id, batch_id)
        except (_Raced, CommitConflictError):
            if attempt == SINK_ATTEMPTS - 1:
                raise CommitConflictError(
                    "the sink's conversations kept changing under it (other writers ending or "
                    "mapping them): its batch was not sent") from None
    raise AssertionError("unreachable")


def _send_once(broker: StreamBroker, target: SinkTarget, keys: Sequence[str],
               bodies: Sequence[bytes | str], query_id: str | None,
               batch_id: int | None) -> int:
    statements = sql(broker)
    where = (target.from_service, target.to_service, target.contract)
    with broker.transaction() as tx:
        if query_id is not None:
            last = tx.execute(statements["sink_last_batch"], (query_id,)).fetchone()
            if last is not None and last[0] >= batch_id:
                return 0
        order = list(dict.fromkeys(keys))
        known = {row[0]: (row[1], row[2]) for row in tx.execute(
            statements["sink_conversations"], (*where, json.dumps(order))).fetchall()}
        handles: dict[str, str] = {}
        fresh: dict[str, str] = {}
        replaced: list[str] = []
        for key in order:
            handle, state = known.get(key, (None, None))
            if handle is not None and state in SENDABLE:
                handles[key] = handle
                continue
            if handle is not None:
                replaced.append(handle)
                if state in ("DI", "ER"):  # the target ended it: end our side too
                    tx.end_conversation(handle)
            handles[key] = fresh[key] = tx.begin_dialog(*where)
        send, message_type = tx.send, target.message_type
        for key, body in zip(keys, bodies, strict=True):
            send(handles[key], message_type, body)
        if query_id is not None and not tx.execute(
                statements["sink_advance"], (query_id, batch_id, broker.clock.now())).rowcount:
            tx.rollback()  # another commit of the same batch got there first
            return 0
        if fresh and tx.execute(statements["sink_map"], {
                "from_service": where[0], "to_service": where[1], "contract": where[2],
                "map": json.dumps(fresh), "replaced": json.dumps(replaced)}).rowcount != len(fresh):
            tx.rollback()
            raise _Raced
    return len(bodies)
