"""Received messages leave their queue: at once when they lie together, else in bulk later.

A RECEIVE's commit deletes the rows it took when there are several and they are dense in queue
order (a run sent together).  One row alone, or rows spread thin over the queue, are not
deleted: their queuing_orders go into ``sb_consumed`` (a few adjacent integer keys), and from
then on every reader treats them as gone (``live``).  A sweep deletes all marked rows
together, inside the receiving commit that comes ``SWEEP_COMMITS`` commits after the first
mark, or sooner once ``SWEEP_ROWS`` rows are marked.

Why: a conversation's messages are spread over the pages of the transactions that sent them.
Deleting many of one conversation at once writes a scattered table or index page for nearly
each of them to the WAL (and later to the database file); marking them writes one or two
pages, and a sweep deletes the messages of many receives with each page written once.
Deleting even one row writes three pages (the table and both indexes), its mark one.
Several dense rows are cheap to delete at once, and marks have a cost of their own: a reader
steps over the marked rows at the head of its scan (a conversation received 100 at a time in
order would step over up to 3,200 of its own last receives; one at a time, over up to 32).
The mark keeps the ``message_id`` guard of the delete it replaces: a row deleted meanwhile
(END CONVERSATION WITH CLEANUP) is never marked.  Positions are never given twice (migration
8), so the mark of a message deleted another way matches no later message; a sweep clears
every mark.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sbroker.storage.ports import Connection

SWEEP_COMMITS = 32
"""Receiving commits of one process from its first mark to the sweep: bounds how long marked
rows stay in the way of readers."""
SWEEP_ROWS = 4096
"""Marked rows of one process that call for a sweep sooner."""
DENSE = 8
"""Rows taken by one commit, two or more, are deleted at once when they span fewer than DENSE
queuing orders per row: then they share pages (about ten rows fill one), and marks would only
be in the way (the measurements behind the threshold: docs/queue-storage.md)."""

_DELETE = "DELETE FROM sb_messages WHERE queuing_order = ? AND message_id = ?"
_MARK_ONE = (
    "INSERT OR IGNORE INTO sb_consumed(queuing_order) SELECT queuing_order FROM sb_messages"
    " WHERE queuing_order = ? AND message_id = ?"
)
_MARK = (  # many rows in one statement: {"queuing_order": "message_id", ...}
    "INSERT OR IGNORE INTO sb_consumed(queuing_order) SELECT m.queuing_order"
    " FROM json_each(?) j JOIN sb_messages m"
    " ON m.queuing_order = CAST(j.key AS INTEGER) AND m.message_id = j.value"
)
_SWEEP = "DELETE FROM sb_messages WHERE queuing_order IN (SELECT queuing_order FROM sb_consumed)"
_CLEAR = "DELETE FROM sb_consumed"  # with the rows above; any left matched no row any more
_COUNT = (  # received rows leaving sb_messages, per queue (see 0004_operations.sql)
    "INSERT INTO sb_queue_counters(queue_id, received) VALUES (?, ?)"
    " ON CONFLICT(queue_id) DO UPDATE SET received = received + excluded.received"
)
_COUNT_SWEPT = (
    "INSERT INTO sb_queue_counters(queue_id, received) SELECT m.queue_id, count(*)"
    " FROM sb_consumed c JOIN sb_messages m ON m.queuing_order = c.queuing_order WHERE true"
    " GROUP BY m.queue_id"
    " ON CONFLICT(queue_id) DO UPDATE SET received = received + excluded.received"
)


def live(alias: str) -> str:
    """SQL: the message row ``alias`` has not been received (it is not in sb_consumed)."""
    return (f"NOT EXISTS (SELECT 1 FROM sb_consumed c"
            f" WHERE c.queuing_order = {alias}.queuing_order)")


class Sweeper:
    """One process's policy and count of what it marked since its last sweep.  Used only
    inside write transactions, which the writer runs one at a time."""

    def __init__(self, *, every_commits: int = SWEEP_COMMITS, every_rows: int = SWEEP_ROWS,
                 dense: int = DENSE) -> None:
        self.every_commits = every_commits
        self.every_rows = every_rows
        self.dense = dense  # 0: mark every row
        self.rows = 0
        self.commits = 0

    def consume(self, conn: Connection, taken: Sequence[tuple[int, str]],
                queue_id: int) -> None:
        """Remove the received rows ``(queuing_order, message_id)`` of one queue: delete
        them (and count them) if there are several and they are dense, else mark them; and
        sweep when it is time."""
        orders = [order for order, _ in taken]
        if len(orders) > 1 and max(orders) - min(orders) < self.dense * len(orders):
            deleted = conn.executemany(_DELETE, taken).rowcount
            if deleted:
                conn.execute(_COUNT, (queue_id, deleted))
        else:
            if len(taken) == 1:
                conn.execute(_MARK_ONE, taken[0])
            else:  # one statement, not one per row: half the time for 100 rows
                conn.execute(_MARK, (json.dumps(dict(taken)),))
            self.rows += len(taken)
        if self.rows:
            self.commits += 1
            if self.rows >= self.every_rows or self.commits >= self.every_commits:
                self.sweep(conn)

    def sweep(self, conn: Connection) -> None:
        """Delete every consumed message (any process's), counted, and every mark."""
        conn.execute(_COUNT_SWEPT)
        conn.execute(_SWEEP)
        conn.execute(_CLEAR)
        self.rows = self.commits = 0
