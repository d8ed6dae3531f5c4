"""Ghost cleanup on PostgreSQL: vacuum ``sb_messages`` when its dead rows pile up.

A received message's row is deleted at COMMIT, and its entry in ``sb_messages_ready`` stays in
the index, dead, until a VACUUM removes it.  When a backlog drains, messages leave from the
head of the queue, so those entries gather exactly where every RECEIVE starts: each RECEIVE
steps over all of them, page by page, before it reaches a ready row.  The heap fills with
dead rows meanwhile.  Autovacuum comes at most once a minute per database
(``autovacuum_naptime``), later on a big table (its scale factor).

SQL Server's ghost cleanup task does this for Service Broker's queues.  Here, after every
heartbeat, each broker's session thread reads the table's dead and live rows from the
statistics (``pg_stat_user_tables``, cheap) and, once the dead rows reach
``MIN_DEAD + FRACTION x live rows``, starts ``VACUUM (SKIP_LOCKED) sb_messages`` in a thread of
its own, on a connection of its own (a VACUUM of a big table takes a while, and the session
thread must keep listening for commits).  Several brokers on one database need no leader: a
VACUUM that finds another running on the table skips it, and a finished one resets the count
for all.  The threshold grows with the table because a VACUUM reads all of it and its
indexes.  VACUUM takes no lock that blocks SEND, RECEIVE or COMMIT.  A role that may not
vacuum the table (not its owner, the database's owner or a superuser) does not try: autovacuum
still runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg

from sbroker.core import threads
from sbroker.storage.postgres.connection import BACKEND

log = logging.getLogger("sbroker.storage")

MIN_DEAD = 1000
FRACTION = 0.02


def due(dead: int, live: int, *, min_dead: int = MIN_DEAD, fraction: float = FRACTION) -> bool:
    """Whether ``dead`` dead rows beside ``live`` live ones are worth a VACUUM."""
    return dead >= min_dead + fraction * live


def vacuum(conn: psycopg.Connection[Any]) -> bool:
    """VACUUM ``sb_messages`` on ``conn`` (autocommit); whether it ran.  A failure is logged,
    not raised: the cleanup is an optimisation, and autovacuum is still there."""
    try:
        conn.execute(BACKEND.vacuum_messages)
    except psycopg.Error as exc:
        log.warning("could not vacuum sb_messages: %s", exc)
        return False
    return True


class Cleanup:
    """Started by the session thread after each heartbeat (:meth:`after_heartbeat`); one
    VACUUM at a time, each in a short-lived thread on a new connection (``connect``)."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]]) -> None:
        self._connect = connect
        self._worker: threading.Thread | None = None
        self._refused = False

    def after_heartbeat(self, conn: psycopg.Connection[Any]) -> bool:
        """Look at the dead rows on ``conn`` (the session's); start a VACUUM if they are due
        and none of this broker's is running.  Whether one started."""
        if self._worker is not None and self._worker.is_alive():
            return False
        row = conn.execute(BACKEND.messages_dead_rows).fetchone()
        # The thresholds as the module has them now (not due()'s defaults, bound at import).
        if row is None or not due(int(row[0]), int(row[1]), min_dead=MIN_DEAD,
                                  fraction=FRACTION):
            return False
        if not row[2]:  # PostgreSQL would skip it with a warning in its log, every second
            if not self._refused:
                self._refused = True
                log.debug("not vacuuming sb_messages: this role does not own it")
            return False
        log.debug("vacuuming sb_messages: %d dead rows beside %d live", row[0], row[1])
        self._worker = threading.Thread(target=self._run, daemon=True,
                                        name="sbroker-pg-cleanup")
        self._worker.start()
        return True

    def _run(self) -> None:
        try:
            with self._connect() as conn:
                vacuum(conn)
        except Exception as exc:  # the server is away: the next heartbeat tries again
            log.debug("could not connect to vacuum sb_messages: %s", exc)

    def close(self) -> None:
        """Wait for a running VACUUM (it holds a connection to the database)."""
        thread, self._worker = self._worker, None
        threads.join(thread, 60)
