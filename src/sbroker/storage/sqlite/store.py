"""The SQLite backend as one :class:`~sbroker.storage.ports.Store`: the connector (file,
migrations, pool), the group-commit writer, the checkpointer, the sweeper of received rows,
the change feed and the liveness of sessions."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sbroker.core.clock import SYSTEM_CLOCK, Clock
from sbroker.storage.ports import Connection
from sbroker.storage.queries import Queries
from sbroker.storage.reaper import Reaper
from sbroker.storage.sqlite.changefeed import DataVersionFeed
from sbroker.storage.sqlite.checkpoint import Checkpointer
from sbroker.storage.sqlite.connection import SQL, SqliteConnection
from sbroker.storage.sqlite.connector import Connector, parse_target
from sbroker.storage.sqlite.liveness import PidLiveness
from sbroker.storage.sqlite.locks import SqliteTxStorage
from sbroker.storage.sqlite.sends import SerialSends
from sbroker.storage.sqlite.sweeper import Sweeper
from sbroker.storage.sqlite.writer import Writer
from sbroker.storage.watermark import Watermark


class SqliteStore:
    """One SQLite broker database."""

    dialect = "sqlite"
    sql: Queries = SQL
    errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(self, target: str | os.PathLike[str], *, durability: str = "normal",
                 clock: Clock = SYSTEM_CLOCK) -> None:
        """``clock``: the store's own time (group-commit delays, change-feed rates, reaping):
        real by default, whatever clock the broker above runs on."""
        path, temporary = parse_target(target)
        self.clock = clock
        self.connector = Connector(path, durability=durability, temporary=temporary)
        self.path = path
        self.location = path.stem
        self.checkpointer = Checkpointer(self.connector.connect)
        self.sweeper = Sweeper()
        self.writer = Writer(self.connector.connect, self.connector.sync,
                             on_commit=self.checkpointer.committed, clock=clock)
        self.commit_path = self.writer
        self.feed = DataVersionFeed(self.connector.connect, clock=clock)
        self.liveness = PidLiveness(self.connector.read)
        self._reaper = Reaper(self.liveness, self.drop_sessions, self.feed._changed,
                              clock=clock)
        self.sends = SerialSends()

    def watermark(self, clock: Callable[[], float]) -> Watermark:
        """One writer at a time: ids become visible in the order they were given."""
        return Watermark(in_order=True, clock=clock)

    # -- connections ----------------------------------------------------------------------------
    def read(self) -> Any:
        return self.connector.read()

    @contextmanager
    def connection(self) -> Iterator[SqliteConnection]:
        """A pooled connection (the same as :meth:`read`)."""
        with self.connector.read() as conn:
            yield conn

    def run(self, fn: Callable[[SqliteConnection], Any], *, durable: bool = True) -> Any:
        """A short write transaction through the group-commit writer."""
        return self.writer.run(fn, durable=durable)

    def tx_storage(self, owner: str, session: int, now: Callable[[], float]) -> SqliteTxStorage:
        return SqliteTxStorage(self, owner, session, now)

    # -- what backends do differently -------------------------------------------------------------
    def consume(self, conn: Connection, taken: Sequence[tuple[int, str]],
                queue_id: int) -> None:
        self.sweeper.consume(conn, taken, queue_id)

    def read_relation(self, conn: Connection, name: str) -> Any:
        # The one statement built here: an identifier cannot be a parameter. The name is
        # checked against the schema first and quoted.
        if conn.query_one(conn.sql.application_relation, (name,)) is None:
            return None
        quoted = '"' + name.replace('"', '""') + '"'
        return conn.execute(f"SELECT * FROM {quoted}")

    def pending_locks(self) -> str:
        """Groups locked in this process's writer memory only (or being released by a commit
        still running), as a statement parameter: readers outside the writer must treat
        them as locked."""
        return json.dumps(self.writer.lazy_groups())

    # -- sessions -------------------------------------------------------------------------------
    def reap(self, own: int, *, force: bool = False, within: SqliteConnection | None = None
             ) -> int:
        """Drop the locks and rows of sessions whose process died (at most every
        REAP_INTERVAL unless ``force``); how many.  Tells the change feed's subscribers.
        ``within``: the writer's connection, when called inside one of its transactions (the
        rows go in that transaction: the writer cannot be asked for another meanwhile)."""
        if within is None:
            return self._reaper.reap(own, force=force)

        def drop(dead: Sequence[int]) -> None:
            within.execute(within.sql.drop_sessions, (SqliteConnection.ids(dead),))

        return self._reaper.reap(own, force=force, drop=drop)

    def drop_sessions(self, sessions: Sequence[int]) -> None:
        """Delete the rows of these sessions: their group locks, activation rows, sessions."""
        param = SqliteConnection.ids(sessions)

        self.writer.run(lambda conn: conn.execute(conn.sql.drop_sessions, (param,)),
                        durable=False)

    def close(self) -> None:
        self.feed.close()
        self.writer.close()
        self.checkpointer.close()
        self.connector.close()
