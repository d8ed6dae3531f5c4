"""Received messages leave their queue in bulk: the deferred delete of RECEIVE.

A RECEIVE's commit does not delete the rows it took.  It records their queuing_order in
``sb_consumed`` (a few adjacent integer keys), and from then on every reader treats them as
gone (``live``).  A sweep deletes the consumed rows together, every ``SWEEP_COMMITS``
receiving commits or ``SWEEP_ROWS`` rows of a process, inside that commit.

Why: a conversation's messages are spread over the pages of the transactions that sent them.
Deleting 100 of one conversation at once writes some 150 scattered table and index pages to
the WAL (and later to the database file); marking them writes one or two pages, and a sweep
deletes the messages of many receives with each page written once.  The mark keeps the
``message_id`` guard of the delete it replaces: a row deleted meanwhile (END CONVERSATION
WITH CLEANUP) and its queuing_order reused is never marked.  A trigger drops the mark of any
deleted message in the same transaction, so no later message can inherit one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

SWEEP_COMMITS = 32
"""Receiving commits of one process between sweeps.  A RECEIVE that picks the next group
steps over the consumed rows at the head of the queue; this bounds how many there are."""
SWEEP_ROWS = 4096
"""Consumed rows of one process that call for a sweep sooner."""

_MARK = (
    "INSERT OR IGNORE INTO sb_consumed(queuing_order) SELECT queuing_order FROM sb_messages"
    " WHERE queuing_order = ? AND message_id = ?"
)
_SWEEP = "DELETE FROM sb_messages WHERE queuing_order IN (SELECT queuing_order FROM sb_consumed)"


def live(alias: str) -> str:
    """SQL: the message row ``alias`` has not been received (it is not in sb_consumed)."""
    return (f"NOT EXISTS (SELECT 1 FROM sb_consumed c"
            f" WHERE c.queuing_order = {alias}.queuing_order)")


class Sweeper:
    """One process's count of what it marked since its last sweep.  Used only inside write
    transactions, which the writer runs one at a time."""

    def __init__(self, *, every_commits: int = SWEEP_COMMITS,
                 every_rows: int = SWEEP_ROWS) -> None:
        self.every_commits = every_commits
        self.every_rows = every_rows
        self.rows = 0
        self.commits = 0

    def mark(self, conn: sqlite3.Connection, taken: Sequence[tuple[int, str]]) -> None:
        """Record the received rows ``(queuing_order, message_id)`` as consumed, and sweep
        when it is time."""
        conn.executemany(_MARK, taken)
        self.rows += len(taken)
        self.commits += 1
        if self.rows >= self.every_rows or self.commits >= self.every_commits:
            self.sweep(conn)

    def sweep(self, conn: sqlite3.Connection) -> None:
        """Delete every consumed message (any process's); their marks go with them."""
        conn.execute(_SWEEP)
        self.rows = self.commits = 0
