"""Ghost cleanup on PostgreSQL: vacuum ``sb_messages`` when its dead rows pile up.

A received message's row is deleted at COMMIT, and its entry in ``sb_messages_ready`` stays in
the index, dead, until a VACUUM removes it.  Messages leave a queue from its head, so those
entries gather exactly where every RECEIVE starts: each RECEIVE steps over all of them, page by
page, before it reaches a ready row.  Autovacuum comes at most once a minute per database
(``autovacuum_naptime``) and later on a big table (its scale factor), so between two of its
runs a busy queue's RECEIVE walks over a minute of traffic: draining 20,000 messages with one
reader, a RECEIVE read 53 pages of that index (``bench.multihost``'s shape).

SQL Server's ghost cleanup task does this for Service Broker's queues; here each broker's
session thread does it: every heartbeat it reads the table's dead-row count from the
statistics (``pg_stat_user_tables``, cheap) and, once the dead rows reach
``MIN_DEAD + FRACTION x live rows``, runs ``VACUUM (SKIP_LOCKED) sb_messages``.  Several brokers
on one database need no leader: a VACUUM that finds another running on the table skips it, and
a finished one resets the count for all.  The threshold grows with the table because a VACUUM
reads all of it and its indexes: on a big backlog it runs less often.  VACUUM takes no lock
that blocks SEND, RECEIVE or COMMIT.  A role that does not own the table cannot vacuum it
(PostgreSQL warns and skips; autovacuum still runs).
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from sbroker.storage.postgres.connection import BACKEND

log = logging.getLogger("sbroker.storage")

MIN_DEAD = 1000
FRACTION = 0.02


def due(dead: int, live: int, *, min_dead: int = MIN_DEAD, fraction: float = FRACTION) -> bool:
    """Whether ``dead`` dead rows beside ``live`` live ones are worth a VACUUM."""
    return dead >= min_dead + fraction * live


def clean_up(conn: psycopg.Connection[Any], *, min_dead: int | None = None,
             fraction: float | None = None) -> bool:
    """VACUUM ``sb_messages`` on ``conn`` (autocommit) if its dead rows are due (thresholds:
    the module's unless given); whether it did.  Errors other than a lost connection are
    logged and swallowed: the cleanup is an optimisation, and autovacuum is still there."""
    row = conn.execute(BACKEND.messages_dead_rows).fetchone()
    if row is None or not due(int(row[0]), int(row[1]),
                              min_dead=MIN_DEAD if min_dead is None else min_dead,
                              fraction=FRACTION if fraction is None else fraction):
        return False
    try:
        conn.execute(BACKEND.vacuum_messages)
    except psycopg.OperationalError:
        raise  # the connection is gone: the session thread reconnects
    except psycopg.Error as exc:
        log.warning("could not vacuum sb_messages (%d dead rows): %s", row[0], exc)
        return False
    log.debug("vacuumed sb_messages: %d dead rows beside %d live", row[0], row[1])
    return True
