"""The PostgreSQL backend as one :class:`~sbroker.storage.ports.Store`: one broker database
on a server, shared by the processes of many hosts.

- connector.py: the URL, the server's checks, numbered migrations, the psycopg pool;
- connection.py: the seam's Connection over a psycopg connection (placeholders, lost
  connections);
- locks.py: a broker transaction's storage (group locks as advisory locks of its own
  PostgreSQL transaction);
- session.py: sessions with their lock and heartbeat, LISTEN/NOTIFY as the change feed;
- migrations/0002_locks.sql: the lock functions, which also make timers, lifetimes and
  redelivery happen once however many brokers are started on the database.

Short write transactions (DDL, timers, the network) are plain transactions on a pooled
connection (:class:`PgCommitPath`): PostgreSQL runs them concurrently, and the engine's
commit locks the conversations it changes (``lock_conversations``) where SQLite's single
writer made that implicit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg

from sbroker.core.clock import SYSTEM_CLOCK, Clock
from sbroker.storage.ports import Connection
from sbroker.storage.postgres.connection import BACKEND, SQL, PgConnection
from sbroker.storage.postgres.connector import Connector
from sbroker.storage.postgres.locks import PgTxStorage
from sbroker.storage.postgres.sends import CommitSends
from sbroker.storage.postgres.session import LeaseLiveness, ListenFeed
from sbroker.storage.queries import Queries
from sbroker.storage.reaper import Reaper
from sbroker.storage.watermark import Watermark

T = TypeVar("T")


class PgCommitPath:
    """A short write transaction on a pooled connection (PostgreSQL runs them side by side)."""

    def __init__(self, store: PgStore) -> None:
        self._store = store

    def run(self, fn: Callable[[PgConnection], T], *, durable: bool = True) -> T:
        connector = self._store.connector
        conn = connector.checkout()
        try:
            conn.begin()
            try:
                with conn.batched():
                    result = fn(conn)
                    conn.commit()
            except BaseException:
                if conn.usable and conn.in_transaction:
                    conn.rollback()
                raise
        finally:
            connector.release(conn)
        self._store.feed.committed()
        return result


class PgStore:
    """One broker database on a PostgreSQL server."""

    dialect = "postgresql"
    sql: Queries = SQL
    errors: tuple[type[Exception], ...] = (psycopg.Error,)

    def __init__(self, url: str, *, durability: str = "normal", create: bool = True,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        """``clock``: the store's own time (NOTIFY coalescing, heartbeats, reaping): real by
        default, whatever clock the broker above runs on."""
        self.clock = clock
        self.connector = Connector(url, durability=durability, create=create)
        self.location = self.connector.database
        self.commit_path = PgCommitPath(self)
        self.feed = ListenFeed(self.connector, clock=clock)
        self.liveness = LeaseLiveness(self.connector, self.feed, clock=clock)
        self._reaper = Reaper(self.liveness, self.drop_sessions, self.feed.changed,
                              clock=clock)
        self.sends = CommitSends()

    def watermark(self, clock: Callable[[], float]) -> Watermark:
        """Hosts and threads commit at once: a hole below a row read may be a commit under
        way, and is waited for a while."""
        return Watermark(in_order=False, clock=clock)

    # -- connections ----------------------------------------------------------------------------
    def read(self) -> Any:
        return self.connector.read()

    @contextmanager
    def connection(self) -> Iterator[PgConnection]:
        """A pooled connection in autocommit mode (the same as :meth:`read`)."""
        with self.connector.read() as conn:
            yield conn

    def run(self, fn: Callable[[PgConnection], Any], *, durable: bool = True) -> Any:
        return self.commit_path.run(fn, durable=durable)

    def tx_storage(self, owner: str, session: int, now: Callable[[], float]) -> PgTxStorage:
        return PgTxStorage(self, session)

    # -- what backends do differently -------------------------------------------------------------
    def consume(self, conn: Connection, taken: Sequence[tuple[int, str]],
                queue_id: int) -> None:
        """Received rows leave at once (deleted in the receiving commit), counted."""
        conn.execute(BACKEND.consume, (json.dumps(dict(taken)), queue_id))

    def read_relation(self, conn: Connection, name: str) -> Any:
        # The one statement built here: an identifier cannot be a parameter. The name is
        # the catalog's own (found by the statement), quoted.
        row = conn.query_one(conn.sql.application_relation, (name,))
        if row is None:
            return None
        quoted = '"' + str(row[0]).replace('"', '""') + '"'
        return conn.execute(f"SELECT * FROM {quoted}")

    def pending_locks(self) -> str:
        """Every session sees a group lock the moment it is taken (pg_locks): none pending
        (as the JSON list that statements take)."""
        return "[]"

    # -- sessions -------------------------------------------------------------------------------
    def reap(self, own: int, *, force: bool = False) -> int:
        """Drop the rows of sessions found dead (their group locks went with their
        connections already); how many."""
        return self._reaper.reap(own, force=force)

    def drop_sessions(self, sessions: Sequence[int]) -> None:
        self.commit_path.run(lambda conn: conn.execute(conn.sql.drop_sessions,
                                                       (conn.ids(sessions),)))

    def close(self) -> None:
        self.liveness.close()
        self.feed.close()
        self.connector.close()
