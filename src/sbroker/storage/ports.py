"""The storage seam: what the engine needs of a backend, and nothing about how it is done.

A backend (``storage/sqlite``, ``storage/postgres``) provides a :class:`Store`:

- **Connections** with explicit transactions and a few query verbs (:class:`Connection`).
  Statements are named blocks of the backend's ``.sql`` file (``store.sql.<name>``), so the
  engine holds no SQL of either dialect.
- **CommitPath** — how a short write transaction is applied: SQLite's group-commit writer
  (many transactions of a process share one SQLite commit), a plain transaction on a pooled
  connection on PostgreSQL.
- **TxStorage** — the storage half of one broker transaction: how conversation groups are
  found and locked for RECEIVE (lock rows kept in the writer's memory on SQLite; row locks
  that die with the session on PostgreSQL), how an application write holds the transaction
  open, and how COMMIT and ROLLBACK end it.
- **ChangeFeed** — how commits made by other processes or hosts are noticed (``PRAGMA
  data_version`` polling; LISTEN/NOTIFY).
- **Liveness** — how broker sessions are registered and found dead (pids on one host; leases
  with heartbeats across hosts).
- **SendPath** — how SENDs to a conversing local peer go straight into its queue (one
  statement known at once then a numbering UPDATE on SQLite; one function answered with
  COMMIT on PostgreSQL), and the peers it remembers.
- **Watermark** — how far the transmission queue was read (ids visible in order under one
  writer; holes waited for under many).

Everything else — conversations, priorities, activation, the network — is the engine's and
the services', written once against these ports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, Protocol, TypeVar

from sbroker.core.clock import Clock
from sbroker.storage.queries import Queries
from sbroker.storage.watermark import Watermark

T = TypeVar("T")
Row = tuple[Any, ...]


class Cursor(Protocol):
    """What a statement returns: rows, and how many rows it changed."""

    @property
    def rowcount(self) -> int: ...

    @property
    def description(self) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """One connection of a backend, for one thread at a time."""

    @property
    def dialect(self) -> str: ...

    @property
    def sql(self) -> Queries:
        """The backend's named statements: ``conn.execute(conn.sql.some_name, params)``."""
        ...

    def execute(self, sql: str, parameters: Any = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Cursor: ...

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row of a query, or None."""
        ...

    def query_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row of a query."""
        ...

    def ids(self, values: Iterable[Any], /) -> Any:
        """A list as one statement parameter (JSON text on SQLite, an array on
        PostgreSQL)."""
        ...

    @property
    def in_transaction(self) -> bool: ...

    def begin(self, *, write: bool = False) -> None:
        """Open a transaction (``write``: take the write lock now, where that means one)."""
        ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...


class CommitPath(Protocol):
    """How short write transactions are applied."""

    def run(self, fn: Callable[[Connection], T], *, durable: bool = True) -> T:
        """Run ``fn(conn)`` inside a write transaction and commit it; ``fn``'s result or
        exception.  ``durable=False``: bookkeeping that need not survive a crash (locks)."""
        ...


class TxStorage(Protocol):
    """The storage half of one broker transaction (see the module docstring)."""

    locks: dict[str, int]
    """Conversation groups this transaction holds: group id -> queue id."""

    def reader(self) -> Connection:
        """A connection for the statements' reads (the held one once there is one)."""
        ...

    def take(self, queue_id: int, group: str | None, handle: str | None, limit: int,
             received: Sequence[int], probing: bool) -> list[Row]:
        """RECEIVE's storage step: lock ``group`` (or the best unlocked group with ready
        messages) and return its ready rows in RECEIVE order, at most ``limit`` (-1: all),
        skipping rows of ``received`` (queuing orders this transaction already took).
        ``probing``: a retry after a wake-up; may look before it writes.  [] if nothing."""
        ...

    def lock_next(self, queue_id: int, received: Sequence[int], probing: bool) -> str | None:
        """GET CONVERSATION GROUP's storage step: lock the best unlocked group with ready
        messages (other than rows of ``received``) and return it, or None."""
        ...

    def lock(self, queue_id: int, groups: Sequence[str]) -> bool:
        """Lock every group of ``groups`` (all or none counts: False when any is held by
        another transaction)."""
        ...

    def hold(self) -> Connection:
        """Open the backend write transaction now and keep it to the end of the broker
        transaction (an application write statement must commit with it)."""
        ...

    @property
    def held(self) -> bool: ...

    def commit(self, apply: Callable[[Connection], None], *, received: bool,
               changed: bool = True) -> None:
        """Run ``apply`` and release this transaction's locks in one write transaction,
        and commit it. ``received``: the transaction received messages; ``changed``: it did
        more than receive (other processes should hear of it at once; a commit that only
        received may be told later)."""
        ...

    def rollback(self, count: Callable[[Connection], T] | None) -> T | None:
        """Undo everything, release the locks, then run ``count`` (the poison bookkeeping of
        rolled-back RECEIVEs, if any) in a write transaction that survives this rollback."""
        ...

    def close(self) -> None:
        """Give back the connections (after commit or rollback)."""
        ...


class Direct(NamedTuple):
    """One SEND that may go straight into its local peer's queue as far as the engine knows
    (both ends were conversing, the message type exists and the body is valid): the
    backend's statement checks the rest in the database."""

    sender: int  # the sender's rowid (conv_order)
    handle: str  # the sender's handle (guards against a reused rowid)
    peer: int  # the peer's rowid
    peer_queue: int
    message_type: str
    validation: str
    body: bytes
    message_id: str
    trace: str | None = None  # the trace context the message carries (its SEND's traceparent)


Verdict = bool | Callable[[], bool]
"""What :meth:`SendPath.send` did: True, every message went in; False, nothing was written
(the commit goes on the ordinary way); a callable, the answer comes with COMMIT (call it
after: False means nothing was written and the commit must be made again the ordinary way)."""


class SendPath(Protocol):
    """How a commit's SENDs on conversations whose local peer converses go straight into
    the peer's queue, and what the backend remembers of such conversations between commits.

    SQLite's single writer knows the outcome of such INSERTs at once and numbers the
    senders in a second statement; PostgreSQL's ``sb_send_direct`` locks, checks, inserts and
    numbers in one function whose answer comes with COMMIT, so it only takes commits that do
    nothing else."""

    def peer(self, handle: str) -> tuple[int, int] | None:
        """The conversing local peer learned for sender ``handle``: (rowid, queue)."""
        ...

    def learn(self, handle: str, peer: int, peer_queue: int) -> None:
        """``handle``'s local peer was seen conversing (a hint the statement checks)."""
        ...

    def forget(self, handle: str) -> None:
        """``handle`` changed or is gone: its next SEND goes the ordinary way."""
        ...

    def takes(self, count: int, alone: bool) -> bool:
        """Whether ``count`` SENDs of one commit may try to go straight (``alone``: the commit
        does nothing but these SENDs)."""
        ...

    def send(self, conn: Connection, sends: Sequence[Direct], now: float, version: str,
             alone: bool) -> Verdict:
        """Put ``sends`` into their peers' queues, numbered, if the database agrees (both ends
        conversing, nothing waiting in the transmission queue, the catalog still at
        ``version``): all or nothing."""
        ...


class ChangeFeed(Protocol):
    """Notices commits made by other processes (or hosts) on the same database."""

    def subscribe(self, on_change: Callable[[], None], *, min_interval: float = 0.0) -> None:
        """Call ``on_change`` (from any thread) soon after another process commits, while
        :meth:`watch` is in effect; at most every ``min_interval`` seconds."""
        ...

    @property
    def noticed(self) -> int:
        """How many times the feed noticed another connection's commit, told or not (a
        waiter compares it before and after it began watching: a change noticed while
        nobody watched was not told)."""
        ...

    def watch(self) -> AbstractContextManager[None]:
        """While entered, someone waits for other processes' commits: look for them."""
        ...

    def close(self) -> None: ...


class Liveness(Protocol):
    """Broker sessions: one per open broker, and how a dead one is recognised."""

    def register(self, now: float) -> int:
        """A new session for this process; its id is never reused."""
        ...

    def dead(self, own: int) -> list[int]:
        """Sessions (other than ``own``) whose process is gone."""
        ...


class Store(Protocol):
    """One broker database on one backend."""

    @property
    def dialect(self) -> str:
        """"sqlite" or "postgresql": applications pick their SQL files by it."""
        ...

    @property
    def sql(self) -> Queries: ...

    @property
    def commit_path(self) -> CommitPath: ...

    @property
    def feed(self) -> ChangeFeed: ...

    @property
    def liveness(self) -> Liveness: ...

    @property
    def sends(self) -> SendPath: ...

    @property
    def clock(self) -> Clock:
        """The store's own time (commit delays, change-feed rates, heartbeats, reaping, waits
        for other processes): real unless the store was built with another."""
        ...

    def watermark(self, clock: Callable[[], float]) -> Watermark:
        """How far a reader of the transmission queue has read, for the order in which this
        backend makes rows visible."""
        ...

    @property
    def location(self) -> str:
        """What the database is called in messages and event notifications."""
        ...

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        """The driver's error classes: the engine turns them into BrokerError at its
        boundary."""
        ...

    def read(self) -> AbstractContextManager[Connection]:
        """A pooled connection for reads outside any broker transaction."""
        ...

    def tx_storage(self, owner: str, session: int, now: Callable[[], float]) -> TxStorage:
        """The storage half of a new broker transaction ``owner`` of ``session`` (``now``:
        the broker's clock, for lock times)."""
        ...

    def reap(self, own: int, *, force: bool = False) -> int:
        """Drop the locks and rows of sessions found dead (rate-limited unless ``force``);
        how many; the change feed's subscribers are told."""
        ...

    def drop_sessions(self, sessions: Sequence[int]) -> None:
        """Delete these sessions and what they held (locks, activation rows)."""
        ...

    def pending_locks(self) -> Any:
        """Groups this process locked that other connections cannot see locked yet, as a
        statement parameter (lock-aware reads outside a transaction take it)."""
        ...

    def read_relation(self, conn: Connection, name: str) -> Cursor | None:
        """Every row of the application's table or view ``name`` (not the broker's own), or
        None when there is none (``broker.view`` of an application table)."""
        ...

    def consume(self, conn: Connection, taken: Sequence[tuple[int, str]],
                queue_id: int) -> None:
        """Received rows ``(queuing_order, message_id)`` of one queue leave it (inside the
        receiving commit), counted in the queue's counters."""
        ...

    def close(self) -> None: ...
